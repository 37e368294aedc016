package deps_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
)

func runtime(t *testing.T, name string) runtimes.Runtime {
	t.Helper()
	rt, err := runtimes.Lookup(name)
	require.NoError(t, err)
	return rt
}

func TestNeeded(t *testing.T) {
	tests := map[string]struct {
		runtime string
		deps    string
		want    bool
		wantErr bool
	}{
		"empty":                          {runtime: "nodejs22", deps: "  \n", want: false},
		"package.json without deps":      {runtime: "nodejs22", deps: `{"name":"f","type":"module"}`, want: false},
		"package.json with empty deps":   {runtime: "nodejs22", deps: `{"dependencies":{}}`, want: false},
		"package.json with dev deps":     {runtime: "nodejs22", deps: `{"devDependencies":{"jest":"*"}}`, want: true}, // installed too, as Kyma
		"package.json with deps":         {runtime: "nodejs24", deps: `{"dependencies":{"lodash":"^4"}}`, want: true},
		"package.json with optional":     {runtime: "nodejs24", deps: `{"optionalDependencies":{"x":"1"}}`, want: true},
		"malformed package.json":         {runtime: "nodejs22", deps: `{"dependencies":`, wantErr: true},
		"requirements only comments":     {runtime: "python312", deps: "# nothing\n\n   # here\n", want: false},
		"requirements with a dependency": {runtime: "python312", deps: "# web\nrequests==2.32.0\n", want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := deps.Needed(runtime(t, tc.runtime), tc.deps)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestKey(t *testing.T) {
	node, node24 := runtime(t, "nodejs22"), runtime(t, "nodejs24")
	base := deps.Key(node, `{"dependencies":{"a":"1"}}`, deps.Registry{})
	assert.Len(t, base, 64)
	assert.Equal(t, base, deps.Key(node, `{"dependencies":{"a":"1"}}`, deps.Registry{}), "stable")
	for name, other := range map[string]string{
		"runtime":  deps.Key(node24, `{"dependencies":{"a":"1"}}`, deps.Registry{}),
		"content":  deps.Key(node, `{"dependencies":{"a":"2"}}`, deps.Registry{}),
		"registry": deps.Key(node, `{"dependencies":{"a":"1"}}`, deps.Registry{NPMRC: "registry=http://r/"}),
	} {
		assert.NotEqual(t, base, other, "a different %s gives a different key", name)
	}
	// Field boundaries are unambiguous.
	assert.NotEqual(t,
		deps.Key(node, "a", deps.Registry{NPMRC: "b"}),
		deps.Key(node, "ab", deps.Registry{}))
}

// fakeInstaller writes an executable script standing in for npm or python3.
// It appends a line to <dir>/calls on every run, then runs body.
func fakeInstaller(t *testing.T, body string) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	path = filepath.Join(dir, "installer")
	script := "#!/bin/sh\necho run >> " + calls + "\n" + body + "\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path, calls
}

func countCalls(t *testing.T, calls string) int {
	b, err := os.ReadFile(calls)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "run\n")
}

func TestEnsureNothingToInstall(t *testing.T) {
	npm, calls := fakeInstaller(t, "exit 1")
	inst, err := deps.New(t.TempDir(), deps.WithNPM(npm))
	require.NoError(t, err)
	dir, err := inst.Ensure(context.Background(), runtime(t, "nodejs22"), `{"type":"module"}`, deps.Registry{})
	require.NoError(t, err)
	assert.Empty(t, dir)
	assert.Zero(t, countCalls(t, calls))
}

// TestEnsureInstallsOnce checks that concurrent callers, through separate
// Installers on one cache (as separate processes would be), install a
// dependency set once and all get the same directory, which later calls
// reuse without running the installer.
func TestEnsureInstallsOnce(t *testing.T) {
	npm, calls := fakeInstaller(t, `sleep 0.3
mkdir -p node_modules/fake && echo "module.exports = 1" > node_modules/fake/index.js
cp "$npm_config_userconfig" node_modules/fake/npmrc-seen`)
	cache := t.TempDir()
	rt := runtime(t, "nodejs22")
	const pkg = `{"dependencies":{"fake":"1.0.0"}}`
	reg := deps.Registry{NPMRC: "registry=http://registry.example/\n//registry.example/:_authToken=secret\n"}

	const callers = 6
	dirs := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			inst, err := deps.New(cache, deps.WithNPM(npm))
			if !assert.NoError(t, err) {
				return
			}
			dirs[i], err = inst.Ensure(context.Background(), rt, pkg, reg)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, 1, countCalls(t, calls), "installed once")
	want := filepath.Join(cache, deps.Key(rt, pkg, reg))
	for _, d := range dirs {
		assert.Equal(t, want, d)
	}
	b, err := os.ReadFile(filepath.Join(want, "package.json"))
	require.NoError(t, err)
	assert.Equal(t, pkg, string(b))
	seen, err := os.ReadFile(filepath.Join(want, "node_modules", "fake", "npmrc-seen"))
	require.NoError(t, err)
	assert.Equal(t, reg.NPMRC, string(seen), "npm ran with the .npmrc content")
	assert.NoFileExists(t, filepath.Join(want, ".npmrc"), "credentials stay out of the cache entry")

	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".tmp-") || strings.HasPrefix(e.Name(), ".conf-"), "left over: %s", e.Name())
	}

	inst, err := deps.New(cache, deps.WithNPM(npm))
	require.NoError(t, err)
	again, err := inst.Ensure(context.Background(), rt, pkg, reg)
	require.NoError(t, err)
	assert.Equal(t, want, again)
	assert.Equal(t, 1, countCalls(t, calls), "reused, not reinstalled")
}

func TestEnsurePipArguments(t *testing.T) {
	python, _ := fakeInstaller(t, `echo "$@" > args
target=""
while [ $# -gt 0 ]; do [ "$1" = "--target" ] && target="$2"; shift; done
mkdir -p "$target/fake" && cp args "$target/fake/args" && cp "$PIP_CONFIG_FILE" "$target/fake/conf-seen" && echo "$PIP_INDEX_URL" > "$target/fake/index-url"`)
	inst, err := deps.New(t.TempDir(), deps.WithPython(python), deps.WithEnv("PIP_INDEX_URL=http://ignored/"))
	require.NoError(t, err)
	reg := deps.Registry{PipConf: "[global]\nindex-url = http://index.example/simple/\n"}
	dir, err := inst.Ensure(context.Background(), runtime(t, "python312"), "fake==1.0\n", reg)
	require.NoError(t, err)
	args, err := os.ReadFile(filepath.Join(dir, "site-packages", "fake", "args"))
	require.NoError(t, err)
	assert.Contains(t, string(args), "-m pip install")
	assert.Regexp(t, `--target \S+/site-packages -r \S+/requirements.txt`, string(args))
	idx, err := os.ReadFile(filepath.Join(dir, "site-packages", "fake", "index-url"))
	require.NoError(t, err)
	assert.Equal(t, "\n", string(idx), "PIP_INDEX_URL from the environment does not override pip.conf")
	conf, err := os.ReadFile(filepath.Join(dir, "site-packages", "fake", "conf-seen"))
	require.NoError(t, err)
	assert.Equal(t, reg.PipConf, string(conf))
	assert.FileExists(t, filepath.Join(dir, "requirements.txt"))
}

func TestEnsureFailureCarriesOutput(t *testing.T) {
	npm, calls := fakeInstaller(t, `echo "npm error 404 Not Found - GET https://registry.npmjs.org/no-such-pkg" >&2; exit 1`)
	cache := t.TempDir()
	inst, err := deps.New(cache, deps.WithNPM(npm))
	require.NoError(t, err)
	rt := runtime(t, "nodejs22")
	const pkg = `{"dependencies":{"no-such-pkg":"1.0.0"}}`
	_, err = inst.Ensure(context.Background(), rt, pkg, deps.Registry{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, deps.ErrInstall), err)
	assert.Contains(t, err.Error(), "404 Not Found - GET https://registry.npmjs.org/no-such-pkg")
	assert.NoDirExists(t, filepath.Join(cache, deps.Key(rt, pkg, deps.Registry{})))

	_, err = inst.Ensure(context.Background(), rt, pkg, deps.Registry{})
	require.Error(t, err)
	assert.Equal(t, 2, countCalls(t, calls), "a failure is not cached")
}

func TestEnsureCancel(t *testing.T) {
	npm, _ := fakeInstaller(t, "sleep 30")
	inst, err := deps.New(t.TempDir(), deps.WithNPM(npm))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = inst.Ensure(ctx, runtime(t, "nodejs22"), `{"dependencies":{"slow":"1"}}`, deps.Registry{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := deps.New("")
	assert.True(t, errors.Is(err, deps.ErrInvalidOption))
	_, err = deps.New(t.TempDir(), deps.WithNPM(""))
	assert.True(t, errors.Is(err, deps.ErrInvalidOption))
	_, err = deps.New(t.TempDir(), deps.WithEnv("NOEQUALS"))
	assert.True(t, errors.Is(err, deps.ErrInvalidOption))
	_, err = deps.New(t.TempDir(), deps.WithProgress(nil))
	assert.True(t, errors.Is(err, deps.ErrInvalidOption))
}

// TestEnsureShowsProgress: an installation says when it starts, passes on
// the installer's output line by line as it comes, and says when it is done.
func TestEnsureShowsProgress(t *testing.T) {
	npm, _ := fakeInstaller(t, `echo "added 1 package"
printf 'audited 1 package'
mkdir -p node_modules/fake`)
	var out syncBuffer
	inst, err := deps.New(t.TempDir(), deps.WithNPM(npm), deps.WithProgress(&out))
	require.NoError(t, err)
	_, err = inst.Ensure(context.Background(), runtime(t, "nodejs22"), `{"dependencies":{"fake":"1.0.0"}}`, deps.Registry{})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String())
	assert.Contains(t, lines[0], "kfn: installing the nodejs22 dependencies")
	assert.Equal(t, "kfn: npm install | added 1 package", lines[1])
	assert.Equal(t, "kfn: npm install | audited 1 package", lines[2], "a last line without a newline too")
	assert.Contains(t, lines[3], "kfn: installed the nodejs22 dependencies")
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
