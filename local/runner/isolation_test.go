package runner_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/runner"
	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/test/logtest"
)

// hangingNPM puts a fake npm first in PATH (the runner's installer runs
// "npm" from PATH) that stands for npm running a package.json's
// postinstall script that never ends: it counts its runs, then waits until
// release is called (or the test ends), then fails. The wait polls a file
// because it is the fake installer's own loop, not the test's; the test
// awaits conditions.
func hangingNPM(t *testing.T) (release func(), calls func() int) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho run >> " + filepath.Join(dir, "calls") + "\n" +
		"echo 'running postinstall'\n" +
		"while [ ! -e " + filepath.Join(dir, "release") + " ]; do sleep 0.05; done\n" +
		"echo 'npm error postinstall: never finished' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "npm"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	release = func() { _ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o644) }
	t.Cleanup(release) // the fake ends with the test, whatever happened
	calls = func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return strings.Count(string(b), "run\n")
	}
	return release, calls
}

// nsFunction is a Node.js Function of namespace ns answering body.
func nsFunction(ns, name, body string) *serverlessv1alpha2.Function {
	return &serverlessv1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: serverlessv1alpha2.FunctionSpec{
			Runtime:  serverlessv1alpha2.NodeJS22,
			Replicas: ptr.To[int32](1),
			Source:   serverlessv1alpha2.Source{Inline: &serverlessv1alpha2.InlineSource{Source: `module.exports = { main: () => "` + body + `" }`}},
		},
	}
}

// slowFunction is a Function of namespace ns whose dependencies' postinstall
// never ends.
func slowFunction(ns string) *serverlessv1alpha2.Function {
	fn := nsFunction(ns, "slow", "never")
	fn.Spec.Source.Inline.Dependencies = `{"dependencies":{"left-pad":"1.3.0"},"scripts":{"postinstall":"node -e \"for(;;){}\""}}`
	return fn
}

// get answers namespace/name's first ready process's response, or "" when
// it has none.
func get(r *runner.Runner, namespace, name string) string {
	f := r.Get(namespace, name)
	if f == nil {
		return ""
	}
	eps := f.Pool.Endpoints()
	if len(eps) == 0 {
		return ""
	}
	resp, err := http.Get("http://" + eps[0] + "/")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// applyWithin runs Apply and returns its errors, failing the test when it
// has not returned within limit.
func applyWithin(t *testing.T, r *runner.Runner, limit time.Duration, what string, fns ...*serverlessv1alpha2.Function) []error {
	t.Helper()
	done := make(chan []error, 1)
	go func() { done <- r.Apply(context.Background(), fns) }()
	var errs []error
	require.Eventually(t, func() bool {
		select {
		case errs = <-done:
			return true
		default:
			return false
		}
	}, limit, 10*time.Millisecond, what)
	return errs
}

// TestSlowInstallDelaysOnlyItsFunction: a function of namespace a whose
// dependency install never ends (a postinstall that loops) holds up
// nothing but itself: Apply returns, and another namespace's edit and
// removal are applied, while it installs; an Apply given it again while it
// installs does not install it a second time; once its install failed, the
// error is returned, and that version is not installed again at every
// Apply, only once it changes.
func TestSlowInstallDelaysOnlyItsFunction(t *testing.T) {
	release, calls := hangingNPM(t)
	var log logtest.Buffer
	r, err := runner.New(runner.Config{StateDir: t.TempDir(), Log: supervisor.NewSyncWriter(&log),
		Pool: supervisor.PoolConfig{DrainDelay: 50 * time.Millisecond, DrainGrace: 5 * time.Second}})
	require.NoError(t, err)
	t.Cleanup(r.Stop)

	fast := nsFunction("b", "fast", "v1")
	require.Empty(t, applyWithin(t, r, 30*time.Second, "the first Apply", fast))
	require.Eventually(t, func() bool { return get(r, "b", "fast") == "v1" }, 30*time.Second, 20*time.Millisecond)

	slow := slowFunction("a")
	applyWithin(t, r, 10*time.Second, "Apply returns while a's install runs", slow, fast)
	require.Eventually(t, func() bool { return calls() == 1 }, 10*time.Second, 10*time.Millisecond, "a's install started")

	fast2 := nsFunction("b", "fast", "v2")
	applyWithin(t, r, 10*time.Second, "Apply returns while a's install runs", slow, fast2)
	require.Eventually(t, func() bool { return get(r, "b", "fast") == "v2" }, 30*time.Second, 20*time.Millisecond,
		"b's edit is applied while a installs")

	pids := r.Get("b", "fast").Pool.PIDs()
	require.NotEmpty(t, pids)
	applyWithin(t, r, 10*time.Second, "Apply returns while a's install runs", slow)
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return r.Get("b", "fast") == nil
	}, 30*time.Second, 20*time.Millisecond, "b's function is removed while a installs")
	assert.Equal(t, 1, calls(), "a is installed once, not again at each Apply")

	release()
	var errs []error
	require.Eventually(t, func() bool {
		errs = applyWithin(t, r, 10*time.Second, "Apply", slow)
		return len(errs) == 1
	}, 30*time.Second, 20*time.Millisecond, "a's install failed")
	assert.Contains(t, errs[0].Error(), "a/slow")
	assert.Contains(t, errs[0].Error(), "npm error postinstall: never finished")
	errs = applyWithin(t, r, 10*time.Second, "Apply", slow)
	require.Len(t, errs, 1, "the failure is still reported")
	assert.Equal(t, 1, calls(), "a version that failed is not installed again at every Apply")

	changed := slowFunction("a")
	changed.Spec.Source.Inline.Dependencies = `{"dependencies":{"left-pad":"1.3.1"}}`
	applyWithin(t, r, 10*time.Second, "Apply", changed)
	require.Eventually(t, func() bool { return calls() == 2 }, 10*time.Second, 10*time.Millisecond, "an edit is installed")
}

// TestFailedStartIsNotRetriedUntilItChanges: a version whose processes
// fail to start is reported, and not started again at every Apply that
// asks for it unchanged (each start may take the pool's ready timeout),
// only once it changes.
func TestFailedStartIsNotRetriedUntilItChanges(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, io.Discard)
	good := nsFunction("default", "flaky", "ok")
	require.Empty(t, r.Apply(ctx, []*serverlessv1alpha2.Function{good}))
	require.Eventually(t, func() bool { return get(r, "default", "flaky") == "ok" }, 30*time.Second, 20*time.Millisecond)

	starts := filepath.Join(t.TempDir(), "starts")
	broken := nsFunction("default", "flaky", "never")
	broken.Spec.Source.Inline.Source = `require("fs").appendFileSync(` + "`" + starts + "`" + `, "start\n"); throw new Error("boom");`
	count := func() int { b, _ := os.ReadFile(starts); return strings.Count(string(b), "start\n") }
	var errs []error
	require.Eventually(t, func() bool {
		errs = r.Apply(ctx, []*serverlessv1alpha2.Function{broken})
		return len(errs) == 1
	}, 30*time.Second, 20*time.Millisecond, "the broken version is refused")
	assert.Contains(t, errs[0].Error(), "boom")
	n := count()
	require.Positive(t, n)

	errs = r.Apply(ctx, []*serverlessv1alpha2.Function{broken})
	require.Len(t, errs, 1, "still reported")
	assert.Contains(t, errs[0].Error(), "boom")
	assert.Equal(t, n, count(), "not started again")
	assert.Equal(t, "ok", get(r, "default", "flaky"), "the version that ran keeps serving")
}

// TestNewFunctionThatFailedStartsOnceFixed: a function that never ran
// (its first version failed to start) runs once an edit fixes it.
func TestNewFunctionThatFailedStartsOnceFixed(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, io.Discard)
	bad := nsFunction("default", "late", "x")
	bad.Spec.Source.Inline.Source = `module.exports = { main: () => "x" `
	require.Eventually(t, func() bool { return len(r.Apply(ctx, []*serverlessv1alpha2.Function{bad})) == 1 },
		30*time.Second, 20*time.Millisecond, "the first version fails")
	fixed := nsFunction("default", "late", "fixed")
	r.Apply(ctx, []*serverlessv1alpha2.Function{fixed})
	require.Eventually(t, func() bool { return get(r, "default", "late") == "fixed" }, 30*time.Second, 20*time.Millisecond,
		"the fixed version runs")
}

// TestFirstApplyWaitsAtMostStartWait: kfn dev comes up (its first Apply
// returns) after StartWait even when a function's install never ends,
// says which function it goes on without, and Changes tells when that
// install is done, so that the caller applies again and gets its error.
func TestFirstApplyWaitsAtMostStartWait(t *testing.T) {
	release, _ := hangingNPM(t)
	var log logtest.Buffer
	r, err := runner.New(runner.Config{StateDir: t.TempDir(), Log: supervisor.NewSyncWriter(&log), StartWait: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(r.Stop)

	slow, fast := slowFunction("a"), nsFunction("b", "fast", "up")
	assert.Empty(t, applyWithin(t, r, 10*time.Second, "the first Apply returns after StartWait", slow, fast),
		"nothing failed yet")
	assert.Contains(t, log.String(), "a/slow | kfn: still being installed or started")
	require.Eventually(t, func() bool { return get(r, "b", "fast") == "up" }, 30*time.Second, 20*time.Millisecond)
	assert.Nil(t, r.Get("a", "slow"), "not running before its install")

	seen := r.Changes()
	release()
	require.Eventually(t, func() bool { return r.Changes() > seen }, 30*time.Second, 10*time.Millisecond,
		"the install's end is a change")
	errs := applyWithin(t, r, 10*time.Second, "Apply", slow, fast)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "npm error postinstall: never finished")
}

// TestInstallTimeout: Config.InstallTimeout stops an install that never
// ends; the function's error says so.
func TestInstallTimeout(t *testing.T) {
	hangingNPM(t)
	r, err := runner.New(runner.Config{StateDir: t.TempDir(), Log: io.Discard, InstallTimeout: 300 * time.Millisecond, StartWait: -1})
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	errs := applyWithin(t, r, 20*time.Second, "Apply waits for the install, which its timeout ends", slowFunction("a"))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "did not finish within 300ms")
	assert.Contains(t, errs[0].Error(), "running postinstall")
}

// TestStopEndsInstallsUnderWay: Stop does not wait for an install that
// never ends.
func TestStopEndsInstallsUnderWay(t *testing.T) {
	_, calls := hangingNPM(t)
	r, err := runner.New(runner.Config{StateDir: t.TempDir(), Log: io.Discard, StartWait: 50 * time.Millisecond})
	require.NoError(t, err)
	applyWithin(t, r, 10*time.Second, "Apply", slowFunction("a"))
	require.Eventually(t, func() bool { return calls() == 1 }, 10*time.Second, 10*time.Millisecond)
	stopped := make(chan struct{})
	go func() { r.Stop(); close(stopped) }()
	require.Eventually(t, func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}, 20*time.Second, 10*time.Millisecond, "Stop returns")
	assert.Equal(t, []error{runner.ErrStopped}, r.Apply(context.Background(), nil))
}
