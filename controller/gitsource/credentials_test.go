package gitsource_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/test/gittest"
)

// redirector answers every request with a redirect to the same path on
// target's origin, and records the Authorization header it got.
type redirector struct {
	URL string
	mu  sync.Mutex
	got []string
}

func redirectTo(t *testing.T, target string) *redirector {
	u, err := url.Parse(target)
	require.NoError(t, err)
	r := &redirector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got = append(r.got, req.Header.Get("Authorization"))
		r.mu.Unlock()
		to := *req.URL
		to.Scheme, to.Host = u.Scheme, u.Host
		http.Redirect(w, req, to.String(), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + u.Path
	return r
}

func (r *redirector) authorizations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func basicAuth(t *testing.T) map[string][]byte {
	t.Helper()
	return map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")}
}

// TestCredentialsOnlyForTheRepositorysOrigin checks the rule for a basic
// credentials Secret: it is sent to the origin (scheme, host, port) of the
// Function's url only. A repository that redirects elsewhere is followed
// without the credentials (the other server, a real git http-backend, sees
// no Authorization header, and one that needs them refuses), when the
// reference is resolved and when the source is fetched.
func TestCredentialsOnlyForTheRepositorysOrigin(t *testing.T) {
	elsewhere := gittest.New(t, "", "")
	c1 := elsewhere.Commit(t, map[string]string{"fn/handler.js": "moved"})
	named := redirectTo(t, elsewhere.URL)
	auth, err := gitsource.Auth(v1alpha2.RepositoryAuthBasic, named.URL, basicAuth(t))
	require.NoError(t, err)

	commit, err := gitsource.Resolve(ctx(t), named.URL, "main", auth, testEgress)
	require.NoError(t, err, "the redirect is followed, without the credentials")
	assert.Equal(t, c1, commit)
	dest := filepath.Join(t.TempDir(), "fn")
	require.NoError(t, gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: named.URL, Commit: c1, BaseDir: "fn", Dest: dest, WorkDir: t.TempDir(), Auth: auth, Egress: testEgress}))
	b, err := os.ReadFile(filepath.Join(dest, "handler.js"))
	require.NoError(t, err)
	assert.Equal(t, "moved", string(b))

	require.NotEmpty(t, named.authorizations())
	assert.Contains(t, named.authorizations()[0], "Basic ", "the host the Function names gets the credentials")
	require.NotEmpty(t, elsewhere.Authorizations())
	for _, a := range elsewhere.Authorizations() {
		assert.Empty(t, a, "the server redirected to never gets the credentials")
	}

	// A server elsewhere that needs the same credentials does not get them.
	guarded := gittest.New(t, "alice", "s3cret")
	guarded.Commit(t, map[string]string{"a": "1"})
	toGuarded := redirectTo(t, guarded.URL)
	auth, err = gitsource.Auth(v1alpha2.RepositoryAuthBasic, toGuarded.URL, basicAuth(t))
	require.NoError(t, err)
	_, err = gitsource.Resolve(ctx(t), toGuarded.URL, "main", auth, testEgress)
	require.Error(t, err)
	for _, a := range guarded.Authorizations() {
		assert.Empty(t, a)
	}
}

// TestSubmodulesAreNotFetched checks that a Function's directory with a
// submodule is fetched without it: the submodule's server gets no request,
// so neither the credentials nor anything else reach it.
func TestSubmodulesAreNotFetched(t *testing.T) {
	sub := gittest.New(t, "", "")
	sub.Commit(t, map[string]string{"lib.js": "library"})
	repo := gittest.New(t, "alice", "s3cret")
	repo.Commit(t, map[string]string{"fn/handler.js": "main"})
	repo.AddSubmodule(t, "fn/lib", sub.URL)
	auth, err := gitsource.Auth(v1alpha2.RepositoryAuthBasic, repo.URL, basicAuth(t))
	require.NoError(t, err)
	commit, err := gitsource.Resolve(ctx(t), repo.URL, "main", auth, testEgress)
	require.NoError(t, err)

	before := len(sub.Authorizations()) // git itself cloned it to add it
	dest := filepath.Join(t.TempDir(), "fn")
	require.NoError(t, gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: repo.URL, Commit: commit, BaseDir: "fn", Dest: dest, WorkDir: t.TempDir(), Auth: auth, Egress: testEgress}))
	assert.FileExists(t, filepath.Join(dest, "handler.js"))
	assert.NoFileExists(t, filepath.Join(dest, "lib", "lib.js"))
	assert.Len(t, sub.Authorizations(), before, "no request reaches the submodule's server")
}
