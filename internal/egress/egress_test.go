package egress_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/egress"
)

func TestCheck(t *testing.T) {
	apiServer := netip.MustParseAddrPort("10.96.0.1:443")
	cluster := egress.Policy{
		Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
		Deny: func(a netip.AddrPort) (string, bool) {
			return "the API server's address", a == apiServer
		},
	}
	tests := map[string]struct {
		policy egress.Policy
		addr   string
		ok     bool
	}{
		"pod":                             {cluster, "10.1.2.3", true},
		"pod, IPv6":                       {cluster, "fd00::1", true},
		"loopback":                        {cluster, "127.0.0.1", false},
		"loopback, other":                 {cluster, "127.8.9.10", false},
		"loopback, IPv6":                  {cluster, "::1", false},
		"loopback, IPv4 in IPv6":          {cluster, "::ffff:127.0.0.1", false},
		"loopback in kfn dev":             {egress.Policy{AllowLoopback: true}, "127.0.0.1", true},
		"cloud metadata":                  {egress.Policy{AllowLoopback: true}, "169.254.169.254", false},
		"link-local, IPv6":                {egress.Policy{}, "fe80::1", false},
		"unspecified":                     {egress.Policy{AllowLoopback: true}, "0.0.0.0", false},
		"this network":                    {egress.Policy{}, "0.1.2.3", false},
		"unspecified, IPv6":               {egress.Policy{}, "::", false},
		"multicast":                       {egress.Policy{}, "224.0.0.1", false},
		"broadcast":                       {egress.Policy{}, "255.255.255.255", false},
		"the API server":                  {cluster, "10.96.0.1:443", false},
		"the API server's IP, other port": {cluster, "10.96.0.1:80", true},
		"outside the networks":            {cluster, "192.168.1.1", false},
		"anywhere else without nets":      {egress.Policy{}, "192.168.1.1", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ap, err := netip.ParseAddrPort(tc.addr)
			if err != nil {
				ap = netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 80)
			}
			err = tc.policy.Check(ap)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, egress.ErrRefused)
			}
		})
	}
}

// TestControlRefusesTheDial connects through a net.Dialer with the
// Policy's Control to a real listener on loopback: refused without
// AllowLoopback (and no byte reaches the listener), answered with it.
func TestControlRefusesTheDial(t *testing.T) {
	reached := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached <- struct{}{} }))
	t.Cleanup(srv.Close)
	client := func(p egress.Policy) *http.Client {
		d := &net.Dialer{Timeout: 5 * time.Second, Control: p.Control}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	req := func() *http.Request {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, nil)
		require.NoError(t, err)
		return r
	}
	_, err := client(egress.Policy{}).Do(req())
	require.ErrorIs(t, err, egress.ErrRefused)
	assert.Contains(t, err.Error(), "127.0.0.1:")
	assert.Contains(t, err.Error(), "is a loopback address")
	assert.Empty(t, reached, "nothing reached the listener")

	resp, err := client(egress.Policy{AllowLoopback: true}).Do(req())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Len(t, reached, 1)
}

func TestParseNetworks(t *testing.T) {
	got, err := egress.ParseNetworks(" 10.213.0.0/24, 10.214.0.1/16,,")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.213.0.0/24"), netip.MustParsePrefix("10.214.0.0/16")}, got)
	none, err := egress.ParseNetworks("")
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = egress.ParseNetworks("10.0.0.0")
	assert.Error(t, err)
}

// TestDenyAPIServer: the API server's Service address, as the kubelet
// tells a pod, and its own are refused, an IPv4-mapped form too; others
// are not, and an address outside a cluster is none.
func TestDenyAPIServer(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	p := egress.Policy{Deny: egress.DenyAPIServer(egress.APIServerService(), netip.MustParseAddrPort("172.18.0.2:6443"), netip.AddrPort{})}
	for addr, refused := range map[string]bool{
		"10.96.0.1:443": true, "[::ffff:10.96.0.1]:443": true, "172.18.0.2:6443": true,
		"10.96.0.1:80": false, "172.18.0.3:6443": false,
	} {
		err := p.Check(netip.MustParseAddrPort(addr))
		if refused {
			assert.ErrorIs(t, err, egress.ErrRefused, addr)
			assert.ErrorContains(t, err, "the Kubernetes API server's address", addr)
		} else {
			assert.NoError(t, err, addr)
		}
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	assert.False(t, egress.APIServerService().IsValid(), "outside a cluster")
}
