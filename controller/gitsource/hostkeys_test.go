package gitsource_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/test/gittest"
)

// TestSSHHostKeys resolves and fetches over SSH (git's upload-pack behind
// an SSH server on loopback) with each way a host key can be known, and
// checks that a server whose key is not known is refused before the
// client authenticates (so the server never learns that the key would
// have been accepted) and that nothing is fetched from it.
func TestSSHHostKeys(t *testing.T) {
	repo := gittest.New(t, "", "")
	c1 := repo.Commit(t, map[string]string{"fn/handler.js": "over ssh"})
	clientPEM, client := gittest.NewKey(t)
	srv := repo.ServeSSH(t, client.PublicKey(), nil)
	host := knownhosts.Normalize(srv.Address) // [127.0.0.1]:port
	_, other := gittest.NewKey(t)
	otherLine := "[127.0.0.1]:1 " + string(ssh.MarshalAuthorizedKey(other.PublicKey()))

	tests := map[string]struct {
		secretKnownHosts, platformKnownHosts string
		ok                                   bool
	}{
		"installation's known hosts, by name": {platformKnownHosts: srv.KnownHostsLine(host), ok: true},
		"installation's known hosts, by hashed name": {
			platformKnownHosts: srv.KnownHostsLine(knownhosts.HashHostname(host)), ok: true,
		},
		"installation's known hosts, by pattern":  {platformKnownHosts: srv.KnownHostsLine("[127.0.0.*]:*"), ok: true},
		"Secret's pin, any host":                  {secretKnownHosts: srv.KnownHostsLine("pinned.example"), ok: true},
		"Secret's pin and others known":           {secretKnownHosts: srv.KnownHostsLine("x"), platformKnownHosts: otherLine, ok: true},
		"the key known for another host only":     {platformKnownHosts: srv.KnownHostsLine("github.com", "[127.0.0.1]:1")},
		"another key for this host":               {platformKnownHosts: strings.Replace(otherLine, "[127.0.0.1]:1", host, 1)},
		"another key pinned":                      {secretKnownHosts: otherLine},
		"negated pattern":                         {platformKnownHosts: srv.KnownHostsLine("[127.0.0.*]:*", "!"+host)},
		"revoked by the installation, pinned too": {secretKnownHosts: srv.KnownHostsLine("x"), platformKnownHosts: "@revoked " + srv.KnownHostsLine("*")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{"ssh-privatekey": clientPEM}
			if tc.secretKnownHosts != "" {
				data["known_hosts"] = []byte(tc.secretKnownHosts)
			}
			if tc.platformKnownHosts != "" {
				data[gitsource.KeyPlatformKnownHosts] = []byte(tc.platformKnownHosts)
			}
			auth, err := gitsource.Auth(v1alpha2.RepositoryAuthSSHKey, srv.URL(), data)
			require.NoError(t, err)
			before := srv.Sessions()
			commit, err := gitsource.Resolve(ctx(t), srv.URL(), "main", auth, testEgress)
			dest := filepath.Join(t.TempDir(), "fn")
			ferr := gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: srv.URL(), Commit: c1, BaseDir: "fn", Dest: dest, WorkDir: t.TempDir(), Auth: auth, Egress: testEgress})
			if !tc.ok {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "is not known: add it to the Secret's known_hosts, or ask the administrator to add it to the installation's known hosts (chart value git.knownHosts)")
				require.Error(t, ferr)
				assert.Equal(t, before, srv.Sessions(), "the client stopped before authenticating")
				assert.NoFileExists(t, filepath.Join(dest, "handler.js"))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c1, commit)
			require.NoError(t, ferr)
			b, err := os.ReadFile(filepath.Join(dest, "handler.js"))
			require.NoError(t, err)
			assert.Equal(t, "over ssh", string(b))
		})
	}
}
