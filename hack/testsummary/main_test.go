package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// goTestJSON renders events as go test -json would.
func goTestJSON(t *testing.T, events ...event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func out(pkg, test, text string) event {
	return event{Action: "output", Package: pkg, Test: test, Output: text}
}

func TestMarkersAreDescribes(t *testing.T) {
	assert.Equal(t, singlenode.DumpBegin, DumpBegin)
	assert.Equal(t, singlenode.DumpEnd, DumpEnd)
}

func TestAFailedTestsMessagesComeLastWithoutTheDump(t *testing.T) {
	const pkg = "example.com/e2e"
	in := goTestJSON(t,
		event{Action: "start", Package: pkg},
		event{Action: "run", Package: pkg, Test: "TestGood"},
		out(pkg, "TestGood", "=== RUN   TestGood\n"),
		out(pkg, "TestGood", "    good_test.go:3: all well\n"),
		out(pkg, "TestGood", "--- PASS: TestGood (1.00s)\n"),
		event{Action: "pass", Package: pkg, Test: "TestGood", Elapsed: 1},
		event{Action: "run", Package: pkg, Test: "TestBad"},
		out(pkg, "TestBad", "=== RUN   TestBad\n"),
		event{Action: "run", Package: pkg, Test: "TestBad/sub"},
		out(pkg, "TestBad/sub", "=== RUN   TestBad/sub\n"),
		out(pkg, "TestBad/sub", "    bad_test.go:9: \n"),
		out(pkg, "TestBad/sub", "        \tError:      \tNot equal\n"),
		out(pkg, "TestBad/sub", "    --- FAIL: TestBad/sub (2.00s)\n"),
		event{Action: "fail", Package: pkg, Test: "TestBad/sub", Elapsed: 2},
		out(pkg, "TestBad", "    helpers_test.go:61: \n        "+DumpBegin+" (ns-1, kfn-system)\n"),
		out(pkg, "TestBad", "        --- pod kfn-controller: Running\n"),
		out(pkg, "TestBad", "        "+DumpEnd+"\n"),
		out(pkg, "TestBad", "--- FAIL: TestBad (3.00s)\n"),
		event{Action: "fail", Package: pkg, Test: "TestBad", Elapsed: 3},
		out(pkg, "", "PASS\n"),
		out(pkg, "", "FAIL\n"),
		out(pkg, "", "FAIL\texample.com/e2e\t3.1s\n"),
		event{Action: "fail", Package: pkg, Elapsed: 3.1},
	)
	var b strings.Builder
	_, err := run(strings.NewReader(in), &b, options{})
	require.NoError(t, err)
	got := b.String()
	t.Log(got)

	assert.NotContains(t, got, "all well", "a passing test's output is not printed, as without -v")
	assert.NotContains(t, got, "=== RUN")
	assert.Equal(t, 1, strings.Count(got, "--- pod kfn-controller"), "the dump is printed once, with the failure")
	assert.Equal(t, 2, strings.Count(got, "Error:      \tNot equal"), "the failure is printed, then again in the summary")
	summary := got[strings.Index(got, "=== testsummary"):]
	assert.Contains(t, summary, "1 failed, 0 unfinished")
	assert.Contains(t, summary, "Not equal")
	assert.Contains(t, summary, "--- FAIL: TestBad/sub")
	assert.Contains(t, summary, "(a platform dump, printed above) (ns-1, kfn-system)")
	assert.NotContains(t, summary, "--- pod kfn-controller")
	assert.True(t, strings.HasSuffix(summary, "--- FAIL: TestBad (3.00s)\n"), "the summary ends with the failure: %q", summary)
	assert.Contains(t, got, "FAIL\texample.com/e2e\t3.1s\n")
}

func TestATestCutShortByTheTimeoutIsReportedWithItsOutput(t *testing.T) {
	const pkg = "example.com/e2e"
	in := goTestJSON(t,
		event{Action: "run", Package: pkg, Test: "TestSlow"},
		out(pkg, "TestSlow", "=== RUN   TestSlow\n"),
		out(pkg, "TestSlow", "    slow_test.go:5: waiting for the pod\n"),
		out(pkg, "", "panic: test timed out after 40m0s\n"),
		out(pkg, "", "FAIL\texample.com/e2e\t2400.0s\n"),
		event{Action: "fail", Package: pkg, Elapsed: 2400},
	)
	var b strings.Builder
	_, err := run(strings.NewReader(in), &b, options{})
	require.NoError(t, err)
	got := b.String()
	assert.Contains(t, got, "panic: test timed out")
	assert.Contains(t, got, "=== TestSlow (example.com/e2e) was still running when its package ended")
	assert.Contains(t, got, "0 failed, 1 unfinished")
	assert.True(t, strings.HasSuffix(got, "waiting for the pod\n"), "%q", got)
}

func TestAllPassingPrintsThePackagesOnly(t *testing.T) {
	const pkg = "example.com/unit"
	in := goTestJSON(t,
		event{Action: "run", Package: pkg, Test: "TestA"},
		out(pkg, "TestA", "=== RUN   TestA\n"),
		out(pkg, "TestA", "--- PASS: TestA (0.00s)\n"),
		event{Action: "pass", Package: pkg, Test: "TestA"},
		out(pkg, "", "PASS\n"),
		out(pkg, "", "ok  \texample.com/unit\t0.1s\n"),
		event{Action: "pass", Package: pkg},
	)
	var b strings.Builder
	_, err := run(strings.NewReader(in), &b, options{})
	require.NoError(t, err)
	assert.Equal(t, "ok  \texample.com/unit\t0.1s\n", b.String())
}

func TestALongFailureKeepsItsBeginningAndEnd(t *testing.T) {
	var lines strings.Builder
	for i := range 1000 {
		lines.WriteString(strings.Repeat("x", i%7) + "\n")
	}
	got := summary("first\n" + lines.String() + "last\n")
	assert.True(t, strings.HasPrefix(got, "first\n"))
	assert.True(t, strings.HasSuffix(got, "last\n"))
	assert.Contains(t, got, "(702 lines left out)")
	assert.Equal(t, maxSummaryLines+1, strings.Count(got, "\n"))
}

func TestBrokenInputIsAnError(t *testing.T) {
	_, err := run(strings.NewReader("{\"Action\":"), &strings.Builder{}, options{})
	assert.ErrorContains(t, err, "read go test -json")
}

func TestTimesPrintsEachTopLevelTestAsItEnds(t *testing.T) {
	const pkg = "example.com/e2e"
	in := goTestJSON(t,
		event{Action: "run", Package: pkg, Test: "TestA"},
		event{Action: "run", Package: pkg, Test: "TestA/sub"},
		event{Action: "pass", Package: pkg, Test: "TestA/sub", Elapsed: 1.5},
		event{Action: "pass", Package: pkg, Test: "TestA", Elapsed: 61.25},
		event{Action: "skip", Package: pkg, Test: "TestB", Elapsed: 0},
		out(pkg, "", "ok  \texample.com/e2e\t62.0s\n"),
		event{Action: "pass", Package: pkg, Elapsed: 62},
	)
	var b strings.Builder
	_, err := run(strings.NewReader(in), &b, options{times: true})
	require.NoError(t, err)
	assert.Equal(t, "--- PASS: TestA (61.2s)\n--- SKIP: TestB (0.0s)\nok  \texample.com/e2e\t62.0s\n", b.String(),
		"one line per top-level test, none for a subtest")
}

func TestAPackageOverItsBudgetFails(t *testing.T) {
	pkgRun := func(pkg string, elapsed float64, line string) []event {
		return []event{
			event{Action: "run", Package: pkg, Test: "TestA"},
			event{Action: "pass", Package: pkg, Test: "TestA", Elapsed: elapsed},
			out(pkg, "", line),
			event{Action: "pass", Package: pkg, Elapsed: elapsed},
		}
	}
	tests := map[string]struct {
		events []event
		over   []string
		state  string
	}{
		"within": {pkgRun("example.com/a", 59, "ok  \texample.com/a\t59.0s\n"), nil, "cold"},
		"over":   {pkgRun("example.com/a", 61, "ok  \texample.com/a\t61.0s\n"), []string{"example.com/a"}, "cold"},
		"cached over the budget counts nothing": {
			pkgRun("example.com/a", 61, "ok  \texample.com/a\t(cached)\n"), nil, "cached"},
		"one of two cached": {
			append(pkgRun("example.com/a", 1, "ok  \texample.com/a\t(cached)\n"), pkgRun("example.com/b", 1, "ok  \texample.com/b\t1.0s\n")...), nil, "cold"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			res, err := run(strings.NewReader(goTestJSON(t, tt.events...)), &b, options{budget: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, tt.over, res.overBudget)
			assert.Equal(t, tt.state, res.state())
			if tt.over != nil {
				assert.Contains(t, b.String(), "example.com/a took 1m1s, over its budget of 1m0s")
			}
		})
	}
}

// TestAFailedRunFails: a failed test, a test cut short, and a package
// that failed to build each make the run fail (testsummary exits 1), so
// that `go test -json | testsummary` fails in a shell without pipefail
// (make test's phases run their pipes under hack/phase.sh's bash -c); a
// run of passing and skipped tests does not.
func TestAFailedRunFails(t *testing.T) {
	for name, c := range map[string]struct {
		events []event
		failed bool
	}{
		"passing": {[]event{
			{Action: "run", Package: "example.com/a", Test: "TestA"},
			{Action: "pass", Package: "example.com/a", Test: "TestA", Elapsed: 0.1},
			{Action: "skip", Package: "example.com/a", Test: "TestSkipped"},
			out("example.com/a", "", "ok  \texample.com/a\t0.1s\n"),
			{Action: "pass", Package: "example.com/a", Elapsed: 0.1},
		}, false},
		"a failed test": {[]event{
			{Action: "run", Package: "example.com/a", Test: "TestA"},
			{Action: "pass", Package: "example.com/a", Test: "TestA/sub"},
			{Action: "fail", Package: "example.com/a", Test: "TestA", Elapsed: 0.1},
			{Action: "fail", Package: "example.com/a", Elapsed: 0.1},
		}, true},
		"a test cut short": {[]event{
			{Action: "run", Package: "example.com/a", Test: "TestSlow"},
			out("example.com/a", "", "panic: test timed out after 1s\n"),
			{Action: "fail", Package: "example.com/a", Elapsed: 1},
		}, true},
		"a test that fails when run again (-count)": {[]event{
			{Action: "run", Package: "example.com/a", Test: "TestA"},
			{Action: "pass", Package: "example.com/a", Test: "TestA", Elapsed: 0.1},
			{Action: "run", Package: "example.com/a", Test: "TestA"},
			{Action: "fail", Package: "example.com/a", Test: "TestA", Elapsed: 0.1},
		}, true},
		"a build error": {[]event{
			out("example.com/a", "", "# example.com/a\n./a.go:1:1: syntax error\n"),
			{Action: "fail", Package: "example.com/a"},
		}, true},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := run(strings.NewReader(goTestJSON(t, c.events...)), &strings.Builder{}, options{})
			require.NoError(t, err)
			assert.Equal(t, c.failed, res.failed())
		})
	}
}
