package dev_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/test/testenv"
)

// A Function Kyma accepts but reports as not ready (a Kyma user's
// manifest from api/testdata/not-ready) shows in kfn dev as the controller
// reports it in a cluster: ConfigurationReady, InvalidFunctionSpec and
// Kyma's message, and is not started. A running Function edited into one
// keeps running as it was, as its Deployment does, and shows the condition.
func TestNotReadyFunctionShowsItsCondition(t *testing.T) {
	testenv.LookPath(t, "python3")
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "api", "testdata", "not-ready", "fn-memory-request-too-small.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "small.yaml"), data, 0o644))
	const good = `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: hello
spec:
  runtime: python312
  resourceConfiguration:
    function:
      resources:
        requests:
          cpu: %CPU%
          memory: 64Mi
  source:
    inline:
      source: |
        def main(event, context):
            return "hi"
`
	hello := filepath.Join(dir, "hello.yaml")
	require.NoError(t, os.WriteFile(hello, []byte(strings.ReplaceAll(good, "%CPU%", "50m")), 0o644))

	out := &syncBuffer{}
	p := runDevConfig(t, dev.Config{Dir: dir, WatchInterval: 50 * time.Millisecond}, out)

	const small = "ConfigurationReady: InvalidFunctionSpec: Function request memory(8Mi) should be higher than minimal value (16Mi)"
	st := status(t, p.Addr())
	f := function(st, "fn-memory-request-too-small")
	assert.Equal(t, small, f.Error)
	assert.Equal(t, "nodejs22", f.Runtime)
	assert.Zero(t, f.Replicas, "not started")
	assert.Contains(t, st.Errors, "default/fn-memory-request-too-small: "+small)
	assert.Contains(t, out.String(), "kfn: error: default/fn-memory-request-too-small: "+small)
	awaitStatus(t, p, out, "hello ready", func(st dev.Status) bool { return function(st, "hello").Ready == 1 })
	assert.Empty(t, function(status(t, p.Addr()), "hello").Error)

	require.NoError(t, os.WriteFile(hello, []byte(strings.ReplaceAll(good, "%CPU%", "5m")), 0o644))
	const tiny = "ConfigurationReady: InvalidFunctionSpec: Function request cpu(5m) should be higher than minimal value (10m)"
	awaitStatus(t, p, out, "hello shows the cpu condition", func(st dev.Status) bool { return function(st, "hello").Error == tiny })
	f = function(status(t, p.Addr()), "hello")
	assert.Equal(t, 1, f.Ready, "the version that ran keeps running")
	names := []string{}
	for _, fn := range status(t, p.Addr()).Functions {
		names = append(names, fn.Name)
	}
	assert.Equal(t, []string{"fn-memory-request-too-small", "hello"}, names, "each Function once, sorted")

	// A file read empty (an editor truncates it before writing it) keeps
	// what it defined running, and says how to remove it.
	require.NoError(t, os.WriteFile(hello, nil, 0o644))
	awaitStatus(t, p, out, "the empty file is reported", func(st dev.Status) bool {
		for _, e := range st.Errors {
			if strings.Contains(e, "hello.yaml: the file is empty (still being saved?): Function default/hello kept as defined before") {
				return true
			}
		}
		return false
	})
	f = function(status(t, p.Addr()), "hello")
	assert.Equal(t, 1, f.Ready, "the version that ran keeps running")
	assert.Equal(t, "python312", f.Runtime)

	// A file that cannot be used at all (saved half-written, or a runtime
	// the API refuses) reports its error and leaves what it defined running.
	require.NoError(t, os.WriteFile(hello, []byte(strings.ReplaceAll(strings.ReplaceAll(good, "%CPU%", "50m"), "python312", "python27")), 0o644))
	awaitStatus(t, p, out, "the refused runtime is reported", func(st dev.Status) bool {
		for _, e := range st.Errors {
			if strings.Contains(e, `hello.yaml (document 1): Function "hello" is invalid`) {
				return true
			}
		}
		return false
	})
	f = function(status(t, p.Addr()), "hello")
	assert.Equal(t, 1, f.Ready, "the version that ran keeps running")
	assert.Equal(t, "python312", f.Runtime)
}

// awaitStatus waits up to 30 s for kfn dev's status to satisfy cond; if it does
// not, the test fails with the last status and kfn dev's output as they
// are then (a message given to Eventually would be the output from before
// the wait).
func awaitStatus(t *testing.T, p *dev.Platform, out *syncBuffer, what string, cond func(dev.Status) bool) {
	t.Helper()
	var mu sync.Mutex // a condition may still run when Eventually gives up
	var last dev.Status
	ok := assert.Eventually(t, func() bool {
		st, err := readStatus(p.Addr())
		if err != nil {
			return false
		}
		mu.Lock()
		last = st
		mu.Unlock()
		return cond(st)
	}, 30*time.Second, 20*time.Millisecond, what)
	if !ok {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s: last status %+v\noutput:\n%s", what, last, out.String())
	}
}
