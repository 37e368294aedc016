package dev_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/dev"
)

// nodeFunction is a manifest of a Node.js Function of namespace ns that
// answers body.
func nodeFunction(ns, name, body string) string {
	return `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  runtime: nodejs22
  source:
    inline:
      source: |
        module.exports = { main: () => "` + body + `" }
`
}

// A Function whose dependency install never ends (a package.json whose
// postinstall script loops) holds up no other namespace: while it
// installs, another namespace's edit, new Subscription and deleted
// Function are applied; once its install failed, kfn dev reports it
// without any file changing. The fake npm first in PATH (kfn dev runs
// "npm" from PATH) stands for npm running that postinstall: it waits for
// the test to let it fail, so no registry is needed.
func TestSlowInstallHoldsUpNoOtherNamespace(t *testing.T) {
	bin := t.TempDir()
	release := filepath.Join(bin, "release")
	calls := filepath.Join(bin, "calls")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/sh\necho run >> "+calls+"\n"+
		"while [ ! -e "+release+" ]; do sleep 0.05; done\necho 'npm error postinstall: never finished' >&2\nexit 1\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })

	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("b.yaml", nodeFunction("b", "fast", "v1"))
	write("c.yaml", nodeFunction("c", "doomed", "here"))

	out := &syncBuffer{}
	p := runDevConfig(t, dev.Config{Dir: dir, WatchInterval: 50 * time.Millisecond, DrainGrace: 5 * time.Second}, out)
	awaitStatus(t, p, out, "fast and doomed ready", func(st dev.Status) bool {
		return function(st, "fast").Ready == 1 && function(st, "doomed").Ready == 1
	})

	write("a.yaml", nodeFunction("a", "slow", "never")+`      dependencies: |
        {"dependencies": {"left-pad": "1.3.0"}, "scripts": {"postinstall": "node -e \"for(;;){}\""}}
`)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(calls); return strings.Count(string(b), "run\n") == 1 },
		30*time.Second, 20*time.Millisecond, "a's install began")

	write("b.yaml", nodeFunction("b", "fast", "v2")+`---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata:
  name: orders
  namespace: b
spec:
  sink: http://fast.b.svc.cluster.local
  source: shop
  types:
    - order.created.v1
`)
	require.NoError(t, os.Remove(filepath.Join(dir, "c.yaml")))
	awaitStatus(t, p, out, "b's edit and Subscription and c's deletion are applied while a installs", func(st dev.Status) bool {
		return len(st.Subscriptions) == 1 && function(st, "doomed").Name == "" && function(st, "fast").Ready == 1
	})
	require.Eventually(t, func() bool { return get(p.Addr(), "/b/fast") == "v2" }, 30*time.Second, 20*time.Millisecond,
		"b's new version serves")
	st := status(t, p.Addr())
	assert.Empty(t, function(st, "slow").Name, "a's function is not running yet")
	assert.Empty(t, st.Errors)

	require.NoError(t, os.WriteFile(release, nil, 0o644))
	awaitStatus(t, p, out, "a's failed install is reported, no file having changed", func(st dev.Status) bool {
		for _, e := range st.Errors {
			if strings.HasPrefix(e, "a/slow: ") && strings.Contains(e, "npm error postinstall: never finished") {
				return true
			}
		}
		return false
	})
	assert.Contains(t, out.String(), "kfn: error: a/slow: ")
	b, _ := os.ReadFile(calls)
	assert.Equal(t, 1, strings.Count(string(b), "run\n"), "installed once, not again at each reload")
}

// get answers a GET of kfn dev's path, "" on any failure.
func get(addr, path string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}
