package function

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kfn-dev/kfn/internal/egress"
)

// TestGitEgressRefusesTheAPIServer: the controller's default Git egress
// refuses the API server's Service address (from the pod's environment)
// and the address the controller talks to, besides loopback; a policy
// that denies something itself is kept as it is.
func TestGitEgressRefusesTheAPIServer(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	p := gitEgress(DefaultConfig().GitEgress, "https://172.18.0.2:6443")
	for addr, refused := range map[string]bool{
		"10.96.0.1:443": true, "172.18.0.2:6443": true, "127.0.0.1:8080": true, "169.254.169.254:80": true,
		"10.96.0.10:80": false, "140.82.121.4:443": false,
	} {
		err := p.Check(netip.MustParseAddrPort(addr))
		if refused {
			assert.ErrorIs(t, err, egress.ErrRefused, addr)
		} else {
			assert.NoError(t, err, addr)
		}
	}
	assert.NoError(t, gitEgress(DefaultConfig().GitEgress, "https://kubernetes.default.svc").Check(netip.MustParseAddrPort("172.18.0.2:6443")),
		"a host name is not an address to deny")
	own := egress.Policy{Deny: func(netip.AddrPort) (string, bool) { return "", false }}
	assert.NoError(t, gitEgress(own, "https://172.18.0.2:6443").Check(netip.MustParseAddrPort("172.18.0.2:6443")), "the policy's own Deny")
}
