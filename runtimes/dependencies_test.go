package runtimes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
	"github.com/kfn-dev/kfn/test/pkgindex"
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

// startIndex serves test/pkgindex's package index on the loopback address
// until the test ends.
func startIndex(t *testing.T) *pkgindex.Index {
	t.Helper()
	index, err := pkgindex.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = index.Close() })
	return index
}

// installFromIndex installs packageJSON's dependencies for rt from the test's
// package index (a private registry, through .npmrc) into a new dependency
// cache, and returns the installer and the directory.
func installFromIndex(t *testing.T, rt runtimes.Runtime, index *pkgindex.Index, packageJSON string) (*deps.Installer, string) {
	t.Helper()
	inst, err := deps.New(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ctx, rt, packageJSON, deps.Registry{NPMRC: index.NPMRC()})
	require.NoError(t, err)
	return inst, depsDir
}

// TestNPMPrivateRegistry installs with real npm from a private registry
// configured only through .npmrc content (registry URL and token), and
// imports the package from an ES module handler.
func TestNPMPrivateRegistry(t *testing.T) {
	t.Parallel()
	testenv.LookPath(t, "npm")
	rt := lookup(t, "nodejs24")
	index := startIndex(t)
	inst, depsDir := installFromIndex(t, rt, index, `{"dependencies":{"kfn-greet":"^1.0.0"}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	assert.NotContains(t, dirNames(t, depsDir), ".npmrc")
	assert.Positive(t, index.Requests(pkgindex.NPM, pkgindex.Package), "npm asked the index")

	h := startHost(t, rt, fixture(t, rt, "deps-private"), hostOptions{cfg: runtimes.Config{DepsDir: depsDir}})
	r := h.mustDo("GET", "/", nil, "")
	require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
	assert.Equal(t, "Hi node from kfn-greet", r.body)

	// Without the token the same install fails, with npm's reason.
	_, err := inst.Ensure(ctx, rt, `{"dependencies":{"kfn-greet":"^1.0.0"}}`, deps.Registry{NPMRC: "registry=" + index.NPMRegistry() + "\n"})
	require.Error(t, err)
	assert.ErrorIs(t, err, deps.ErrInstall)
	assert.Contains(t, err.Error(), "401")
}

// TestNPMDevDependencies: a Function whose package.json lists a package
// under devDependencies only can use it, and its NODE_ENV is empty, as on
// Kyma, whose images are built with NODE_ENV empty (nodejs24/Dockerfile's
// ARG NODE_ENV, never given) and whose pods run "npm install" without
// --production (buildless-serverless's resources/deployment.go). kfn
// omitted them (--omit=dev) and set NODE_ENV=production.
func TestNPMDevDependencies(t *testing.T) {
	t.Parallel()
	testenv.LookPath(t, "npm")
	rt := lookup(t, "nodejs24")
	_, depsDir := installFromIndex(t, rt, startIndex(t), `{"devDependencies":{"kfn-greet":"^1.0.0"}}`)
	require.NotEmpty(t, depsDir, "devDependencies are something to install")

	h := startHost(t, rt, fixture(t, rt, "dev-deps"), hostOptions{cfg: runtimes.Config{DepsDir: depsDir}})
	r := h.mustDo("GET", "/", nil, "")
	require.Equal(t, 200, r.status, "%s\n%s", r.body, h.out)
	assert.JSONEq(t, `{"greeting":"Hi node from kfn-greet","nodeEnv":""}`, r.body)
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
	index := startIndex(t)
	name, whl := index.Wheel()

	inst, err := deps.New(t.TempDir(), deps.WithPython(python))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ctx, rt, "# greeting\nkfn-greet==1.0.0\n", deps.Registry{PipConf: index.PipConf()})
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(depsDir, "site-packages", "kfn_greet"))
	assert.NotContains(t, dirNames(t, depsDir), "pip.conf")
	assert.Positive(t, index.Requests(pkgindex.PyPI, pkgindex.Package), "pip asked the index")

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
		assert.JSONEq(t, `{"axios":"function","cloudevents":"order.created.v1","co":"co","express":"function","morgan":"function","mz":"number","otel":"function","axiosVersion":"1.21.1"}`, r.body)
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
