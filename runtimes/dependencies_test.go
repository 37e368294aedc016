package runtimes_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
	"github.com/kfn-dev/kfn/test/testenv"
)

// copyFixture copies a test function to a fresh directory, so a test can
// check that nothing was written into it.
func copyFixture(t *testing.T, rt runtimes.Runtime, name string) string {
	t.Helper()
	src := fixture(t, rt, name)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o444))
	}
	return dst
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestNPMDependencies installs packages from the public npm registry and
// runs a CommonJS and an ES module handler that use them.
func TestNPMDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the npm registry")
	}
	t.Parallel()
	testenv.LookPath(t, "npm")
	rt := lookup(t, "nodejs22")
	inst, err := deps.New(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ctx, rt, `{"dependencies":{"is-number":"7.0.0","is-plain-obj":"4.1.0"}}`, deps.Registry{})
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(depsDir, "node_modules", "is-number"))

	tests := map[string]struct {
		fixture string
		want    string
	}{
		"CommonJS require": {"deps-cjs", `{"style":"cjs","isNumber":true}`},
		"ES module import": {"deps-esm", `{"style":"esm","isNumber":true,"plain":true}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fnDir := copyFixture(t, rt, tc.fixture)
			before := dirNames(t, fnDir)
			h := startHost(t, rt, fnDir, hostOptions{cfg: runtimes.Config{DepsDir: depsDir}})
			r := h.mustDo("GET", "/?n=42", nil, "")
			require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
			assert.JSONEq(t, tc.want, r.body)
			assert.Equal(t, before, dirNames(t, fnDir), "nothing is written into the function directory")
		})
	}
}

// npmRegistry is a private npm registry serving one package, kfn-greet, to
// clients presenting its token.
type npmRegistry struct {
	*httptest.Server
	token   string
	tarball []byte
}

func newNPMRegistry(t *testing.T) *npmRegistry {
	reg := &npmRegistry{token: "s3cr3t-token", tarball: npmTarball(t, map[string]string{
		"package/package.json": `{"name":"kfn-greet","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     `module.exports = { greet: (who) => 'Hi ' + who + ' from kfn-greet' };`,
	})}
	reg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+reg.token {
			http.Error(w, `{"error":"auth required"}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/kfn-greet":
			sha1sum := sha1.Sum(reg.tarball)
			sha512sum := sha512.Sum512(reg.tarball)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"kfn-greet","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{`+
				`"name":"kfn-greet","version":"1.0.0","main":"index.js",`+
				`"dist":{"tarball":"%s/kfn-greet/-/kfn-greet-1.0.0.tgz","shasum":"%s","integrity":"sha512-%s"}}}}`,
				reg.URL, hex.EncodeToString(sha1sum[:]), base64.StdEncoding.EncodeToString(sha512sum[:]))
		case "/kfn-greet/-/kfn-greet-1.0.0.tgz":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(reg.tarball)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(reg.Close)
	return reg
}

func npmTarball(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1e9, 0)}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// TestNPMPrivateRegistry installs with real npm from a private registry
// configured only through .npmrc content (registry URL and token), and
// imports the package from an ES module handler.
func TestNPMPrivateRegistry(t *testing.T) {
	t.Parallel()
	testenv.LookPath(t, "npm")
	rt := lookup(t, "nodejs24")
	reg := newNPMRegistry(t)
	host := reg.Listener.Addr().String()
	npmrc := fmt.Sprintf("registry=%s/\n//%s/:_authToken=%s\n", reg.URL, host, reg.token)

	inst, err := deps.New(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ctx, rt, `{"dependencies":{"kfn-greet":"^1.0.0"}}`, deps.Registry{NPMRC: npmrc})
	require.NoError(t, err)
	assert.NotContains(t, dirNames(t, depsDir), ".npmrc")

	h := startHost(t, rt, fixture(t, rt, "deps-private"), hostOptions{cfg: runtimes.Config{DepsDir: depsDir}})
	r := h.mustDo("GET", "/", nil, "")
	require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
	assert.Equal(t, "Hi node from kfn-greet", r.body)

	// Without the token the same install fails, with npm's reason.
	_, err = inst.Ensure(ctx, rt, `{"dependencies":{"kfn-greet":"^1.0.0"}}`, deps.Registry{NPMRC: "registry=" + reg.URL + "/\n"})
	require.Error(t, err)
	assert.ErrorIs(t, err, deps.ErrInstall)
	assert.Contains(t, err.Error(), "401")
}

// wheel builds a pure-Python wheel of the package kfn-greet.
func wheel(t *testing.T) (name string, data []byte) {
	files := []struct{ name, body string }{
		{"kfn_greet/__init__.py", "def greet(who):\n    return 'Hi ' + who + ' from kfn-greet'\n"},
		{"kfn_greet-1.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: kfn-greet\nVersion: 1.0.0\n"},
		{"kfn_greet-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: kfn-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record bytes.Buffer
	for _, f := range files {
		w, err := zw.Create(f.name)
		require.NoError(t, err)
		_, err = w.Write([]byte(f.body))
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("kfn_greet-1.0.0.dist-info/RECORD,,\n")
	w, err := zw.Create("kfn_greet-1.0.0.dist-info/RECORD")
	require.NoError(t, err)
	_, err = w.Write(record.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return "kfn_greet-1.0.0-py3-none-any.whl", buf.Bytes()
}

// TestPipPrivateIndex installs with real pip from a private package index
// (PEP 503 simple API behind basic auth) configured only through pip.conf
// content, and imports the package from a Python handler. PyPI itself is
// not needed.
func TestPipPrivateIndex(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "python312")
	python := interpreter(t, rt)
	if err := exec.Command(python, "-m", "pip", "--version").Run(); err != nil {
		testenv.Missing(t, "pip (python3 -m pip)", err)
	}
	name, whl := wheel(t)
	sum := sha256.Sum256(whl)
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "kfn" || p != "pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="kfn"`)
			http.Error(w, "auth required", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/simple/kfn-greet/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%x">%s</a></body></html>`, name, sum, name)
		case "/files/" + name:
			w.Write(whl)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(index.Close)
	pipConf := fmt.Sprintf("[global]\nindex-url = http://kfn:pw@%s/simple/\n", index.Listener.Addr())

	inst, err := deps.New(t.TempDir(), deps.WithPython(python))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ctx, rt, "# greeting\nkfn-greet==1.0.0\n", deps.Registry{PipConf: pipConf})
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(depsDir, "site-packages", "kfn_greet"))
	assert.NotContains(t, dirNames(t, depsDir), "pip.conf")

	h := startHost(t, rt, fixture(t, rt, "deps"), hostOptions{cfg: runtimes.Config{DepsDir: depsDir}})
	r := h.mustDo("GET", "/", nil, "")
	require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
	assert.Equal(t, "Hi python from kfn-greet", r.body)

	// A requirements.txt may also point at local wheels, with no index at all.
	wheels := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wheels, name), whl, 0o644))
	local, err := inst.Ensure(ctx, rt, fmt.Sprintf("--no-index\n--find-links %s\nkfn-greet==1.0.0\n", wheels), deps.Registry{})
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(local, "site-packages", "kfn_greet"))

	// A package that does not exist fails with pip's message.
	_, err = inst.Ensure(ctx, rt, fmt.Sprintf("--no-index\n--find-links %s\nno-such-package==1.0\n", wheels), deps.Registry{})
	require.Error(t, err)
	assert.ErrorIs(t, err, deps.ErrInstall)
	assert.Contains(t, err.Error(), "no-such-package")
}

// TestKymaLibraries installs the libraries Kyma's Node.js images provide
// (runtimes.NodeLibraries, from the npm registry, as the images and kfn
// dev do) and runs Kyma handlers that require or import them without a
// package.json; a function's own dependency of the same name wins, and a
// handler that names none of them loads none of them.
func TestKymaLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the npm registry")
	}
	t.Parallel()
	testenv.LookPath(t, "npm")
	rt := lookup(t, "nodejs22")
	inst, err := deps.New(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel) // the parallel subtests install too
	libsDir, err := inst.Ensure(ctx, rt, runtimes.NodeLibraries(), deps.Registry{})
	require.NoError(t, err)

	t.Run("CommonJS require", func(t *testing.T) {
		t.Parallel()
		h := startHost(t, rt, copyFixture(t, rt, "kyma-libs"), hostOptions{cfg: runtimes.Config{LibsDir: libsDir}})
		r := h.mustDo("GET", "/", nil, "")
		require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
		assert.JSONEq(t, `{"axios":"function","cloudevents":"order.created.v1","express":"function","otel":"function","axiosVersion":"1.21.1"}`, r.body)
	})
	t.Run("ES module import", func(t *testing.T) {
		t.Parallel()
		h := startHost(t, rt, copyFixture(t, rt, "kyma-libs-esm"), hostOptions{cfg: runtimes.Config{LibsDir: libsDir}})
		r := h.mustDo("GET", "/", nil, "")
		require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
		assert.JSONEq(t, `{"axios":"function","cloudevents":"t.v1"}`, r.body)
	})
	t.Run("the function's own version wins", func(t *testing.T) {
		t.Parallel()
		own, err := inst.Ensure(ctx, rt, `{"dependencies":{"axios":"1.6.0"}}`, deps.Registry{})
		require.NoError(t, err)
		h := startHost(t, rt, copyFixture(t, rt, "kyma-libs"), hostOptions{cfg: runtimes.Config{DepsDir: own, LibsDir: libsDir}})
		r := h.mustDo("GET", "/", nil, "")
		require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
		assert.Contains(t, r.body, `"axiosVersion":"1.6.0"`)
	})
	t.Run("nothing is loaded that the handler does not name", func(t *testing.T) {
		t.Parallel()
		h := startHost(t, rt, copyFixture(t, rt, "no-libs"), hostOptions{cfg: runtimes.Config{LibsDir: libsDir}})
		r := h.mustDo("GET", "/", nil, "")
		require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
		assert.Equal(t, "0", r.body)
	})
}

// TestKymaPythonLibraries runs a Kyma handler that imports the libraries
// Kyma's Python image provides, with the machine's python3: where they are
// installed (the runtime image) it answers; where one is missing (PyPI
// cannot be reached here) the readiness answer names it and says how to
// install it, instead of a bare ModuleNotFoundError.
func TestKymaPythonLibraries(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "python312")
	missing := ""
	for _, lib := range []string{"bottle", "cloudevents", "prometheus_client", "requests"} {
		if exec.Command(testenv.LookPath(t, "python3"), "-c", "import "+lib).Run() != nil {
			missing = lib
			break
		}
	}
	h := startHost(t, rt, copyFixture(t, rt, "kyma-libs"), hostOptions{noWait: true})
	h.waitServing(15 * time.Second)
	r := h.mustDo("GET", runtimes.ReadyPath, nil, "")
	if missing == "" {
		require.Equal(t, 200, r.status, r.body)
		r = h.mustDo("GET", "/", nil, "")
		assert.JSONEq(t, `{"bottle":"bottle","cloudevents":"cloudevents","prometheus_client":"prometheus_client","requests":"requests"}`, r.body)
		return
	}
	assert.Equal(t, 500, r.status)
	assert.Contains(t, r.body, "No module named '"+missing+"'")
	assert.Contains(t, r.body, "Kyma's Python image provides "+missing+": install it for this python3 with 'pip install ")
}
