package pkgindex_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/pkgindex"
)

// The index answers only with its credentials and counts every request
// for a package, answered or not, per ecosystem; the real package
// managers install from it in runtimes' TestNPMPrivateRegistry and
// TestPipPrivateIndex.
func TestIndexCountsRequestsPerPackage(t *testing.T) {
	ix, err := pkgindex.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ix.Close() })
	get := func(path string, auth func(*http.Request)) (int, string) {
		req, err := http.NewRequest(http.MethodGet, ix.URL+path, nil)
		require.NoError(t, err)
		if auth != nil {
			auth(req)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	token := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+pkgindex.NPMToken) }
	basic := func(r *http.Request) { r.SetBasicAuth(pkgindex.PipUser, pkgindex.PipPassword) }

	code, _ := get("/npm/kfn-greet", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, doc := get("/npm/kfn-greet", token)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, doc, ix.NPMRegistry()+"kfn-greet/-/kfn-greet-1.0.0.tgz")
	code, _ = get("/npm/kfn-greet/-/kfn-greet-1.0.0.tgz", token)
	assert.Equal(t, http.StatusOK, code)
	code, _ = get("/npm/other", token)
	assert.Equal(t, http.StatusNotFound, code)

	code, _ = get("/simple/kfn-greet/", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, page := get("/simple/kfn-greet/", basic)
	assert.Equal(t, http.StatusOK, code)
	name, _ := ix.Wheel()
	assert.Contains(t, page, "/files/"+name+"#sha256=")
	code, _ = get("/files/"+name, basic)
	assert.Equal(t, http.StatusOK, code)
	code, _ = get("/simple/other/", basic)
	assert.Equal(t, http.StatusNotFound, code)

	assert.Equal(t, 3, ix.Requests(pkgindex.NPM, pkgindex.Package))
	assert.Equal(t, 1, ix.Requests(pkgindex.NPM, "other"))
	assert.Equal(t, 3, ix.Requests(pkgindex.PyPI, pkgindex.Package))
	assert.Equal(t, 1, ix.Requests(pkgindex.PyPI, "other"))

	assert.True(t, strings.HasPrefix(ix.NPMRC(), "registry="+ix.NPMRegistry()+"\n"))
	assert.Contains(t, ix.PipConf(), "trusted-host = 127.0.0.1\n")
}
