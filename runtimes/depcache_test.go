package runtimes_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/depcachetest"
)

// tokenFile writes the pod's identity token as the kubelet projects it.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(f, []byte(token+"\n"), 0o444))
	return f
}

const depsHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// runClient runs rt's dependency cache client (as the install container
// does) and returns its exit code and output.
func runClient(t *testing.T, rt runtimes.Runtime, command, dir string, env ...string) (int, string) {
	t.Helper()
	argv := rt.DependencyCacheCommand(hostDir)
	cmd := exec.Command(interpreter(t, rt), argv[1], command, "--runtime="+rt.Name, "--hash="+depsHash, "--dir="+dir)
	// Its waits before asking again, 10 ms instead of a second.
	cmd.Env = append(append(processEnv(nil, nil), runtimes.EnvDependencyCacheRetryMS+"=10"), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err, string(out))
	return 0, string(out)
}

// tree describes a directory: each path, relative, with "dir", "link ->
// target" or "file <mode> <content>".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case info.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + (info.Mode() & 0o111).String() + " " + string(b)
		}
		return nil
	}))
	return out
}

// tarTree is tree of a gzip-compressed tar, read with Go's archive/tar.
func tarTree(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		name := strings.TrimSuffix(filepath.Clean(h.Name), "/")
		switch h.Typeflag {
		case tar.TypeDir:
			out[name] = "dir"
		case tar.TypeSymlink:
			out[name] = "link -> " + h.Linkname
		case tar.TypeReg:
			body, err := io.ReadAll(tr)
			require.NoError(t, err)
			out[name] = "file " + (fs.FileMode(h.Mode) & 0o111).String() + " " + string(body)
		default:
			t.Fatalf("entry %s of type %c", h.Name, h.Typeflag)
		}
	}
}

// installedTree makes a dependency directory as npm or pip leaves one:
// nested directories, an executable, a relative link (npm's .bin), a name
// longer than ustar's 100 bytes.
func installedTree(t *testing.T, rt runtimes.Runtime) string {
	t.Helper()
	dir := t.TempDir()
	lib := filepath.Base(rt.DepsLibDir(dir))
	long := strings.Repeat("d", 90) + "/" + strings.Repeat("f", 60) + ".js"
	for name, body := range map[string]string{
		rt.DepsFile():                            "{}\n",
		lib + "/kfn-greet/index.js":              "module.exports = 1\n",
		lib + "/kfn-greet/bin/greet":             "#!/bin/sh\necho hi\n",
		lib + "/kfn-greet/" + long:               "long\n",
		lib + "/kfn_greet/__init__.py":           "X = 1\n",
		lib + "/empty/.keep":                     "",
		lib + "/kfn_greet-1.0.0.dist-info/WHEEL": "Wheel-Version: 1.0\n",
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(dir, lib, "kfn-greet/bin/greet"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, lib, ".bin"), 0o755))
	require.NoError(t, os.Symlink("../kfn-greet/bin/greet", filepath.Join(dir, lib, ".bin", "greet")))
	return dir
}

// TestDependencyCacheClient runs each runtime image's dependency cache
// client as the install container does, against a stand-in of the cache:
// fetch of a set the cache does not hold exits 1 and leaves the directory
// empty (the container then installs); store uploads a gzip-compressed tar
// that Go's archive/tar reads back as the same tree (files, modes, links,
// long names); fetch then exits 0 with the same tree, logging that the
// dependencies came from the cache, also into a directory an earlier,
// failed run left files in. A refused token, a cache that fails,
// or no cache: fetch and store exit 1 (the install script goes on: the pod
// never fails for the cache; a store's 0 says the cache holds the set).
// Fails when a tree does not survive the round trip or an exit code
// changes.
func TestDependencyCacheClient(t *testing.T) {
	for _, name := range []string{"nodejs22", "python312"} {
		rt := lookup(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cache := depcachetest.Start(t)
			env := []string{runtimes.EnvDependencyCache + "=" + cache.Base(), runtimes.EnvIdentityTokenFile + "=" + tokenFile(t, depcachetest.Token),
				runtimes.EnvDependencyWriterTokenFile + "=" + tokenFile(t, depcachetest.WriterToken(rt.Name, depsHash))}

			empty := t.TempDir()
			code, out := runClient(t, rt, "fetch", empty, env...)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, "not in the cache: installing")
			assert.Empty(t, tree(t, empty))

			src := installedTree(t, rt)
			code, out = runClient(t, rt, "store", src, env...)
			require.Equal(t, 0, code, out)
			assert.Contains(t, out, "stored in the cache")
			stored := cache.Object(rt.Name, depsHash)
			require.NotEmpty(t, stored)
			assert.Equal(t, tree(t, src), tarTree(t, stored), "the upload is the directory's tree")
			code, out = runClient(t, rt, "store", src, env...)
			assert.Equal(t, 0, code, out)
			assert.Contains(t, out, "in the cache already")

			// What a failed earlier run of the container left goes first.
			require.NoError(t, os.MkdirAll(filepath.Join(empty, "node_modules", "half-installed"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(empty, rt.DepsFile()), []byte("stale"), 0o644))
			code, out = runClient(t, rt, "fetch", empty, env...)
			require.Equal(t, 0, code, out)
			assert.Contains(t, out, "from the cache")
			assert.Equal(t, tree(t, src), tree(t, empty), "unpacked as installed")

			for what, env := range map[string][]string{
				"another token": {runtimes.EnvDependencyCache + "=" + cache.Base(), runtimes.EnvIdentityTokenFile + "=" + tokenFile(t, "someone-else"),
					runtimes.EnvDependencyWriterTokenFile + "=" + tokenFile(t, depcachetest.WriterToken(rt.Name, depsHash))},
				"no token file": {runtimes.EnvDependencyCache + "=" + cache.Base()},
				"no cache":      nil,
				"unreachable":   {runtimes.EnvDependencyCache + "=http://127.0.0.1:1/_kfn/dependencies"},
			} {
				dir := t.TempDir()
				code, out := runClient(t, rt, "fetch", dir, env...)
				assert.Equal(t, 1, code, "%s: %s", what, out)
				assert.Empty(t, tree(t, dir), what)
				code, out = runClient(t, rt, "store", src, env...)
				assert.Equal(t, 1, code, "%s: %s", what, out)
				if what == "unreachable" {
					assert.Contains(t, out, "asking the cache again", "no connection may pass")
				}
			}

			// Without the writer token (the function container's code, say),
			// the identity alone stores nothing: 403, never asked again.
			before := cache.Requests()
			code, out = runClient(t, rt, "store", src, env[:2]...)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, "not stored in the cache")
			assert.Contains(t, out, "403")
			assert.Equal(t, 1, cache.Requests()-before, "a 403 is final")

			// An answer that may pass is asked again: a fetch up to 3
			// times, a store up to 5 (the event bridge restarting, its
			// bucket not made yet); the program then goes on as if the
			// first had worked.
			cache.FailNext(2, http.StatusServiceUnavailable)
			dir := t.TempDir()
			code, out = runClient(t, rt, "fetch", dir, env...)
			assert.Equal(t, 0, code, out)
			assert.Contains(t, out, "asking the cache again in 0.0 s (3 of 3)")
			assert.Equal(t, tree(t, src), tree(t, dir))
			cache.FailNext(4, http.StatusBadGateway)
			code, out = runClient(t, rt, "store", src, env...)
			assert.Equal(t, 0, code, out)
			assert.Contains(t, out, "(5 of 5)")
			assert.Contains(t, out, "in the cache already")
			// Past them, the fetch installs and the store gives up.
			cache.FailNext(100, http.StatusTooManyRequests)
			before = cache.Requests()
			code, out = runClient(t, rt, "fetch", t.TempDir(), env...)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, "the cache could not be read")
			assert.Equal(t, 3, cache.Requests()-before, "a fetch asks 3 times")
			before = cache.Requests()
			code, out = runClient(t, rt, "store", src, env...)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, "not stored in the cache")
			assert.Equal(t, 5, cache.Requests()-before, "a store asks 5 times")
			cache.FailNext(0, 0)

			// An answer that will not pass is not asked again.
			cache.Force(http.StatusInsufficientStorage)
			before = cache.Requests()
			code, out = runClient(t, rt, "store", src, env...)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, "not stored in the cache")
			assert.Contains(t, out, "507")
			assert.NotContains(t, out, "asking the cache again")
			assert.Equal(t, 1, cache.Requests()-before, "a 507 is final")
		})
	}
}

// tarball builds a gzip-compressed tar of the given entries, in order.
func tarball(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len("x"))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte("x"))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

func tarFile(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg} }
func tarDir(name string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}
}
func tarLink(name, target string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
}

// unsafeArchives are tarballs that reach, or lead, out of the directory
// they are unpacked into, or hold what a dependency directory has no use
// for.
var unsafeArchives = map[string][]*tar.Header{
	"a name with ..":               {tarFile("node_modules/../../escaped")},
	"an absolute name":             {tarFile("/tmp/escaped")},
	"an absolute link":             {tarLink("node_modules/passwd", "/etc/passwd")},
	"a link out":                   {tarLink("node_modules/up", "../../escaped")},
	"a file through a link":        {tarDir("node_modules/"), tarLink("node_modules/l", ".."), tarFile("node_modules/l/escaped")},
	"links that lead out together": {tarLink("d", "."), tarDir("x/"), tarLink("x/l", "../d/..")},
	"a dangling link that leads out through another": {tarDir("sub/"), tarLink("sub/up", ".."), tarLink("esc", "sub/up/../escaped")},
	"a dangling link that leads out through a chain": {tarLink("a", "b"), tarLink("b", "sub/up/../../escaped"), tarDir("sub/"), tarLink("sub/up", "../sub/..")},
	"a hard link":                    {tarFile("a"), {Name: "b", Typeflag: tar.TypeLink, Linkname: "a"}},
	"a device":                       {{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}},
	"a fifo":                         {{Name: "fifo", Typeflag: tar.TypeFifo}},
	"a file where a directory is":    {tarDir("node_modules/"), tarFile("node_modules/a"), tarFile("node_modules/a/b")},
	"a second file of the same name": {tarFile("a"), tarFile("a")},
}

// TestDependencyCacheClientRefusesUnsafeArchives: fetch of a tarball that
// would write or lead outside the dependency directory (.., absolute
// names or link targets, writing through a link, links that together
// leave it), or that holds hard links, devices or fifos, exits 1 with the
// directory empty and nothing written beside it: the container then
// installs. Fails when any of them is unpacked.
func TestDependencyCacheClientRefusesUnsafeArchives(t *testing.T) {
	for _, name := range []string{"nodejs22", "python312"} {
		rt := lookup(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cache := depcachetest.Start(t)
			env := []string{runtimes.EnvDependencyCache + "=" + cache.Base(), runtimes.EnvIdentityTokenFile + "=" + tokenFile(t, depcachetest.Token)}
			for what, entries := range unsafeArchives {
				cache.Put(rt.Name, depsHash, tarball(t, entries...))
				root := t.TempDir()
				deps := filepath.Join(root, "deps")
				require.NoError(t, os.Mkdir(deps, 0o755))
				code, out := runClient(t, rt, "fetch", deps, env...)
				assert.Equal(t, 1, code, "%s: %s", what, out)
				assert.Contains(t, out, "could not be read", what)
				assert.Empty(t, tree(t, deps), "%s: the directory is left empty", what)
				assert.Equal(t, map[string]string{"deps": "dir"}, tree(t, root), "%s: nothing beside it", what)
				assert.NoFileExists(t, "/tmp/escaped", what)
			}
			// The safe shapes of the same entries are unpacked.
			cache.Put(rt.Name, depsHash, tarball(t, tarDir("node_modules/"), tarDir("node_modules/.bin/"), tarFile("node_modules/a"),
				tarLink("node_modules/.bin/a", "../a"), tarLink("dangling", "node_modules/missing"), tarFile("./b")))
			deps := t.TempDir()
			code, out := runClient(t, rt, "fetch", deps, env...)
			require.Equal(t, 0, code, out)
			assert.Equal(t, map[string]string{
				"node_modules": "dir", "node_modules/.bin": "dir", "node_modules/a": "file ---------- x",
				"node_modules/.bin/a": "link -> ../a", "dangling": "link -> node_modules/missing", "b": "file ---------- x",
			}, tree(t, deps))
		})
	}
}

// greetDeps are dependency directories with the package kfn-greet, as the
// install container of a Function that requires it uploads them.
var greetDeps = map[runtimes.Language]map[string]string{
	runtimes.NodeJS: {
		"package.json":                        `{"dependencies":{"kfn-greet":"1.0.0"}}`,
		"node_modules/kfn-greet/package.json": `{"name":"kfn-greet","version":"1.0.0","main":"index.js"}`,
		"node_modules/kfn-greet/index.js":     `module.exports = { greet: (who) => 'Hi ' + who + ' from kfn-greet' };`,
	},
	runtimes.Python: {
		"requirements.txt":                    "kfn-greet==1.0.0\n",
		"site-packages/kfn_greet/__init__.py": "def greet(who):\n    return 'Hi ' + who + ' from kfn-greet'\n",
	},
}

// greetSources are handlers that need kfn-greet.
var greetSources = map[string]map[string]string{
	"nodejs22":  {"handler.js": `const { greet } = require('kfn-greet'); module.exports = { main: (event, context) => greet(context['function-name']) };`, "package.json": `{"dependencies":{"kfn-greet":"1.0.0"}}`},
	"python312": {"handler.py": "from kfn_greet import greet\n\ndef main(event, context):\n    return greet(context['function-name'])\n", "requirements.txt": "kfn-greet==1.0.0\n"},
}

func greetTarball(t *testing.T, lang runtimes.Language) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, body := range greetDeps[lang] {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	var entries []*tar.Header
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			entries = append(entries, tarDir(rel+"/"))
		}
		return nil
	}))
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		require.NoError(t, tw.WriteHeader(h))
	}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	}))
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// TestStandbyHostLoadsDependenciesFromTheCache: a standby host given a
// Function with dependencies (Specialization.Dependencies) fetches them
// from the cache with the pod's identity token into the Function's
// KFN_DEPS_DIR and loads a handler that requires them; when the cache
// does not hold them (404), or holds an archive that would reach outside
// the directory, the specialize request fails saying so and the host
// serves no Function, not even another one (409), never becoming ready.
// Dependencies of another runtime, or without a cache to fetch them from,
// are refused (400) and the host stays on standby. Fails when the
// dependencies are not resolvable by the handler, a failure is answered
// 200, or a failed host takes another Function.
func TestStandbyHostLoadsDependenciesFromTheCache(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			cache := depcachetest.Start(t)
			cache.Put(rt.Name, depsHash, greetTarball(t, rt.Language))
			const token = "a-standby-token"
			bearer := map[string]string{"Authorization": "Bearer " + token}
			start := func() *host {
				h := startHost(t, rt, t.TempDir(), hostOptions{noWait: true, env: map[string]string{
					runtimes.EnvStandbyTokenSHA256: runtimes.StandbyTokenHash(token),
					runtimes.EnvIdentityTokenFile:  tokenFile(t, depcachetest.Token),
				}})
				h.waitServing(15 * time.Second)
				return h
			}
			spec := func(name, hash, runtime string, env map[string]string) string {
				s := runtimes.Specialization{
					Env: map[string]string{
						runtimes.EnvFunctionName: name, runtimes.EnvNamespace: "shop",
						runtimes.EnvDependencyCache: cache.Base(), runtimes.EnvDepsDir: t.TempDir(),
					},
					Files:        greetSources[rt.Name],
					Dependencies: &runtimes.SpecializationDependencies{Runtime: runtime, Hash: hash},
				}
				for k, v := range env {
					if v == "" {
						delete(s.Env, k)
					} else {
						s.Env[k] = v
					}
				}
				b, err := json.Marshal(s)
				require.NoError(t, err)
				return string(b)
			}

			h := start()
			for what, body := range map[string]string{
				"another runtime's":  spec("orders", depsHash, "nodejs99", nil),
				"no cache":           spec("orders", depsHash, rt.Name, map[string]string{runtimes.EnvDependencyCache: ""}),
				"no deps directory":  spec("orders", depsHash, rt.Name, map[string]string{runtimes.EnvDepsDir: ""}),
				"a hash that is not": spec("orders", "../../x", rt.Name, nil),
			} {
				r := h.mustDo("POST", runtimes.SpecializePath, bearer, body)
				assert.Equal(t, http.StatusBadRequest, r.status, "%s: %s", what, r.body)
				assert.Equal(t, "standby", h.mustDo("GET", runtimes.HealthPath, nil, "").body, "%s: still on standby", what)
			}
			r := h.mustDo("POST", runtimes.SpecializePath, bearer, spec("orders", depsHash, rt.Name, nil))
			require.Equal(t, http.StatusOK, r.status, "%s\n%s", r.body, h.out)
			assert.Equal(t, "shop/orders", r.header.Get(runtimes.FunctionHeader))
			assert.Equal(t, "Hi orders from kfn-greet", h.mustDo("GET", "/", nil, "").body, "the handler requires its dependency")
			h.logged(t, "from the cache")

			const missing = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
			cache.Put(rt.Name, "1111111111111111111111111111111111111111111111111111111111111111", tarball(t, tarFile("../escaped")))
			for what, hash := range map[string]string{
				"not in the cache": missing,
				"unsafe archive":   "1111111111111111111111111111111111111111111111111111111111111111",
			} {
				h := start()
				r := h.mustDo("POST", runtimes.SpecializePath, bearer, spec("orders", hash, rt.Name, nil))
				assert.Equal(t, http.StatusInternalServerError, r.status, "%s: %s", what, r.body)
				assert.Contains(t, r.body, "specialize: dependencies: ", what)
				assert.Empty(t, r.header.Get(runtimes.FunctionHeader), what)
				r = h.mustDo("POST", runtimes.SpecializePath, bearer, body(t, runtimes.Specialization{Files: standbySources[rt.Name],
					Env: map[string]string{runtimes.EnvFunctionName: "other", runtimes.EnvNamespace: "shop", "GREETING": "hello"}}))
				assert.Equal(t, http.StatusConflict, r.status, "%s: the host takes no other Function: %s", what, r.body)
				assert.Equal(t, http.StatusServiceUnavailable, h.mustDo("GET", runtimes.ReadyPath, nil, "").status, "%s: never ready", what)
				assert.Equal(t, http.StatusServiceUnavailable, h.mustDo("GET", "/", nil, "").status, "%s: serves nothing", what)
			}
			assert.NoFileExists(t, "/tmp/escaped")
		})
	}
}

// TestStandbyHostPreparesDependencies: a standby host asked to prepare a
// dependency set fetches it before any Function is given to it; the
// specialize request of a Function with that set then asks the cache for
// nothing and loads a handler that requires it; one with another set has
// the prepared one cleared and fetches its own. A host prepares once (409
// after), only with the token (401), only a set the cache holds (404,
// after which it may be asked again), and refuses a body with files or
// without dependencies (400). Fails when the prepared set is fetched again
// at specialize, or left behind under another Function's.
func TestStandbyHostPreparesDependencies(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			cache := depcachetest.Start(t)
			cache.Put(rt.Name, depsHash, greetTarball(t, rt.Language))
			const other = "2222222222222222222222222222222222222222222222222222222222222222"
			cache.Put(rt.Name, other, tarball(t, tarFile("leftover.txt")))
			const token = "a-standby-token"
			bearer := map[string]string{"Authorization": "Bearer " + token}
			start := func() *host {
				h := startHost(t, rt, t.TempDir(), hostOptions{noWait: true, env: map[string]string{
					runtimes.EnvStandbyTokenSHA256: runtimes.StandbyTokenHash(token),
					runtimes.EnvIdentityTokenFile:  tokenFile(t, depcachetest.Token),
				}})
				h.waitServing(15 * time.Second)
				return h
			}
			depsDir := t.TempDir()
			env := map[string]string{runtimes.EnvDependencyCache: cache.Base(), runtimes.EnvDepsDir: depsDir}
			prep := func(hash string) string {
				return body(t, runtimes.Preparation{Env: env, Dependencies: &runtimes.SpecializationDependencies{Runtime: rt.Name, Hash: hash}})
			}
			spec := body(t, runtimes.Specialization{
				Env: map[string]string{
					runtimes.EnvFunctionName: "orders", runtimes.EnvNamespace: "shop",
					runtimes.EnvDependencyCache: cache.Base(), runtimes.EnvDepsDir: depsDir,
				},
				Files:        greetSources[rt.Name],
				Dependencies: &runtimes.SpecializationDependencies{Runtime: rt.Name, Hash: depsHash},
			})

			h := start()
			assert.Equal(t, http.StatusUnauthorized, h.mustDo("POST", runtimes.PreparePath, nil, prep(depsHash)).status)
			for what, b := range map[string]string{
				"files":           `{"files": {"handler.js": "x"}, "dependencies": {"runtime": "` + rt.Name + `", "hash": "` + depsHash + `"}}`,
				"no dependencies": `{"env": {}}`,
				"another runtime": body(t, runtimes.Preparation{Env: env, Dependencies: &runtimes.SpecializationDependencies{Runtime: "nodejs99", Hash: depsHash}}),
			} {
				r := h.mustDo("POST", runtimes.PreparePath, bearer, b)
				assert.Equal(t, http.StatusBadRequest, r.status, "%s: %s", what, r.body)
				assert.Contains(t, r.body, "prepare: ", what)
			}
			const missing = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
			r := h.mustDo("POST", runtimes.PreparePath, bearer, prep(missing))
			assert.Equal(t, http.StatusNotFound, r.status, r.body)
			r = h.mustDo("POST", runtimes.PreparePath, bearer, prep(depsHash))
			require.Equal(t, http.StatusOK, r.status, "asked again after a 404: %s\n%s", r.body, h.out)
			assert.Equal(t, http.StatusConflict, h.mustDo("POST", runtimes.PreparePath, bearer, prep(other)).status, "prepared once")
			assert.Equal(t, "standby", h.mustDo("GET", runtimes.HealthPath, nil, "").body, "still on standby")

			asked := cache.Requests()
			r = h.mustDo("POST", runtimes.SpecializePath, bearer, spec)
			require.Equal(t, http.StatusOK, r.status, "%s\n%s", r.body, h.out)
			assert.Equal(t, asked, cache.Requests(), "the specialize request asked the cache for nothing")
			assert.Equal(t, "Hi orders from kfn-greet", h.mustDo("GET", "/", nil, "").body, "the handler requires the prepared dependency")
			h.logged(t, "prepared before")

			// Another set prepared: cleared, and the Function's own fetched.
			depsDir = t.TempDir()
			env[runtimes.EnvDepsDir] = depsDir
			h = start()
			r = h.mustDo("POST", runtimes.PreparePath, bearer, prep(other))
			require.Equal(t, http.StatusOK, r.status, r.body)
			require.FileExists(t, filepath.Join(depsDir, "leftover.txt"))
			var s runtimes.Specialization
			require.NoError(t, json.Unmarshal([]byte(spec), &s))
			s.Env[runtimes.EnvDepsDir] = depsDir
			r = h.mustDo("POST", runtimes.SpecializePath, bearer, body(t, s))
			require.Equal(t, http.StatusOK, r.status, "%s\n%s", r.body, h.out)
			assert.Equal(t, "Hi orders from kfn-greet", h.mustDo("GET", "/", nil, "").body)
			assert.NoFileExists(t, filepath.Join(depsDir, "leftover.txt"), "the other set is cleared")
		})
	}
}

func body(t *testing.T, s any) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// TestNodeDependencyCacheClientWarmsUp: warm, which a Node.js standby
// host awaits before it listens, runs a fetch end to end through a server
// of its own and leaves nothing in the temporary directory; where nothing
// can be written it still resolves (the host must start). Fails when warm
// leaves its directory behind, rejects, or does not fetch.
func TestNodeDependencyCacheClientWarmsUp(t *testing.T) {
	rt := lookup(t, "nodejs22")
	script := `const dc = require(process.argv[1]);
const http = require('node:http');
let requests = 0;
const orig = http.request;
http.request = function (...a) { requests++; return orig.apply(this, a); };
dc.warm().then(() => { console.log('requests=' + requests); }, (err) => { console.log('rejected ' + err); process.exit(3); });`
	client := filepath.Join(hostDir, "nodejs", "depcache.cjs")
	for name, tmp := range map[string]string{"writable": t.TempDir(), "missing": filepath.Join(t.TempDir(), "none")} {
		cmd := exec.Command(interpreter(t, rt), "-e", script, client)
		cmd.Env = append(processEnv(nil, nil), "TMPDIR="+tmp)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
		if name == "writable" {
			assert.Equal(t, "requests=1\n", string(out), "one fetch through its own server")
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "nothing left in TMPDIR")
		} else {
			assert.Equal(t, "requests=0\n", string(out), "no directory, no fetch, no error")
		}
	}
}

// TestHostFetchesItsDependenciesAtStart: a host given KFN_DEPENDENCY_HASH
// (a pod rendered without the install container) fetches its dependency
// set from the cache into KFN_DEPS_DIR before it loads the handler, which
// then requires it, and what a restarted container's last run left there
// goes first. When the cache does not have the set, the host exits
// DependencyMissingExit and its last line, the container's termination
// message, names the set (by which the controller goes back to
// installing); a hash that is not one, or one without a cache, is refused
// at start. Fails when the handler cannot resolve its dependency, the host
// serves without its set, or its exit does not say why.
func TestHostFetchesItsDependenciesAtStart(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			cache := depcachetest.Start(t)
			cache.Put(rt.Name, depsHash, greetTarball(t, rt.Language))
			start := func(hash string, cfg runtimes.Config) (*host, string) {
				fnDir, depsDir := t.TempDir(), t.TempDir()
				for name, body := range greetSources[rt.Name] {
					require.NoError(t, os.WriteFile(filepath.Join(fnDir, name), []byte(body), 0o644))
				}
				require.NoError(t, os.WriteFile(filepath.Join(depsDir, "left-over"), []byte("x"), 0o644))
				cfg.FunctionName, cfg.Namespace = "orders", "shop"
				cfg.DepsDir, cfg.DependencyHash = depsDir, hash
				cfg.IdentityTokenFile = tokenFile(t, depcachetest.Token)
				if cfg.DependencyCache == "-" {
					cfg.DependencyCache = ""
				} else {
					cfg.DependencyCache = cache.Base()
				}
				return startHost(t, rt, fnDir, hostOptions{cfg: cfg, noWait: true}), depsDir
			}

			h, depsDir := start(depsHash, runtimes.Config{})
			h.waitReady(15 * time.Second)
			assert.Equal(t, "Hi orders from kfn-greet", h.mustDo("GET", "/", nil, "").body, "the handler requires its dependency")
			h.logged(t, "from the cache")
			assert.NoFileExists(t, filepath.Join(depsDir, "left-over"))

			const missing = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
			h, _ = start(missing, runtimes.Config{})
			assert.Equal(t, runtimes.DependencyMissingExit, h.waitExit(15*time.Second), "%s", h.out)
			lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
			assert.Equal(t, runtimes.DependencyMissingMessage+runtimes.DependencySet(rt.Name, missing), lines[len(lines)-1])

			for what, c := range map[string]struct {
				hash string
				cfg  runtimes.Config
			}{
				"a hash that is not": {"../../x", runtimes.Config{}},
				"no cache":           {depsHash, runtimes.Config{DependencyCache: "-"}},
			} {
				h, _ := start(c.hash, c.cfg)
				assert.Equal(t, 1, h.waitExit(15*time.Second), "%s: %s", what, h.out)
				h.logged(t, "KFN_DEPENDENCY_HASH", what)
			}
		})
	}
}
