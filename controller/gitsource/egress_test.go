package gitsource_test

import (
	"net/netip"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/test/gittest"
)

// TestGitStaysWithinEgress: a Function's Git URL, and every redirect its
// server answers, reach only the addresses the egress policy allows, as
// the dispatcher's deliveries do, when the reference is resolved (the
// controller) and when the source is fetched: never loopback (but where
// the policy allows it, as tests and kfn dev do), link-local (the cloud
// metadata address), nor an address the policy denies (the API server's),
// whatever the URL names or the server redirects to; redirects are
// bounded. The repositories are git's http-backend and an SSH server on
// loopback.
func TestGitStaysWithinEgress(t *testing.T) {
	repo := gittest.New(t, "", "")
	c1 := repo.Commit(t, map[string]string{"fn/handler.js": "v1"})
	u, err := url.Parse(repo.URL)
	require.NoError(t, err)
	repoAddr := netip.MustParseAddrPort(u.Host)
	loopback := egress.Policy{AllowLoopback: true}
	deniesRepo := egress.Policy{AllowLoopback: true, Deny: func(a netip.AddrPort) (string, bool) {
		return "the API server's address", a == repoAddr
	}}
	chain := func(hops int, to string) string {
		for range hops {
			to = redirectTo(t, to).URL
		}
		return to
	}

	for name, c := range map[string]struct {
		url    string
		policy egress.Policy
		refuse string // "" when allowed
	}{
		"loopback, where allowed":                  {repo.URL, loopback, ""},
		"loopback, by default":                     {repo.URL, egress.Policy{}, "is a loopback address"},
		"a denied address":                         {repo.URL, deniesRepo, "is the API server's address"},
		"the cloud metadata address":               {"http://169.254.169.254/repo.git", loopback, "is a link-local address"},
		"a redirect to the cloud metadata":         {chain(1, "http://169.254.169.254/repo.git"), loopback, "is a link-local address"},
		"a redirect to a denied address":           {chain(1, repo.URL), deniesRepo, "is the API server's address"},
		"redirects, as many as allowed":            {chain(gitsource.MaxRedirects, repo.URL), loopback, ""},
		"redirects, one too many":                  {chain(gitsource.MaxRedirects+1, repo.URL), loopback, "redirects"},
		"git:// to the cloud metadata address":     {"git://169.254.169.254/repo.git", loopback, "is a link-local address"},
		"a name that resolves to loopback":         {"http://localhost:" + u.Port() + u.Path, egress.Policy{}, "is a loopback address"},
		"an unspecified address":                   {"http://0.0.0.0:" + u.Port() + u.Path, loopback, "is an unspecified address"},
		"an IPv4-mapped IPv6 link-local address":   {"http://[::ffff:169.254.169.254]/repo.git", loopback, "is a link-local address"},
		"a redirect chain to loopback, by default": {chain(2, repo.URL), egress.Policy{}, "is a loopback address"},
		"a path on this machine, by default":       {"file:///etc/repo.git", egress.Policy{}, "a path on this machine"},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(repo.Authorizations())
			commit, err := gitsource.Resolve(ctx(t), c.url, "main", nil, c.policy)
			dest := filepath.Join(t.TempDir(), "fn")
			ferr := gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: c.url, Commit: c1, BaseDir: "fn", Dest: dest, WorkDir: t.TempDir(), Egress: c.policy})
			if c.refuse == "" {
				require.NoError(t, err)
				assert.Equal(t, c1, commit)
				require.NoError(t, ferr)
				assert.FileExists(t, filepath.Join(dest, "handler.js"))
				return
			}
			for _, err := range []error{err, ferr} {
				require.Error(t, err)
				assert.ErrorContains(t, err, c.refuse)
			}
			if c.refuse != "redirects" {
				assert.ErrorIs(t, err, egress.ErrRefused)
				assert.ErrorIs(t, ferr, egress.ErrRefused)
			}
			assert.NoFileExists(t, filepath.Join(dest, "handler.js"))
			if c.refuse != "redirects" {
				assert.Len(t, repo.Authorizations(), before, "the repository was not reached")
			}
		})
	}

	// SSH: a server at a refused address is not connected to, with known
	// and pinned keys alike.
	clientPEM, client := gittest.NewKey(t)
	srv := repo.ServeSSH(t, client.PublicKey(), nil)
	auth, err := gitsource.Auth(v1alpha2.RepositoryAuthSSHKey, srv.URL(), map[string][]byte{
		"ssh-privatekey": clientPEM, "known_hosts": []byte(srv.KnownHostsLine("pinned.example")),
	})
	require.NoError(t, err)
	commit, err := gitsource.Resolve(ctx(t), srv.URL(), "main", auth, loopback)
	require.NoError(t, err, "over SSH, where loopback is allowed")
	assert.Equal(t, c1, commit)
	before := srv.Sessions()
	_, err = gitsource.Resolve(ctx(t), srv.URL(), "main", auth, egress.Policy{})
	require.ErrorIs(t, err, egress.ErrRefused)
	assert.ErrorContains(t, err, "is a loopback address")
	err = gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: srv.URL(), Commit: c1, BaseDir: "fn", Dest: t.TempDir(), WorkDir: t.TempDir(), Auth: auth})
	require.ErrorIs(t, err, egress.ErrRefused, "Fetch's default policy")
	assert.Equal(t, before, srv.Sessions(), "the SSH server was not reached")
}
