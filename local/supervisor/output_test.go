package supervisor_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/test/logtest"
)

// stalledTerminal is a terminal whose writes do not return until release
// is called: a terminal that another function's output keeps busy, at the
// extreme. What it is given afterwards it keeps.
type stalledTerminal struct {
	released chan struct{}
	once     sync.Once
	logtest.Buffer
}

func newStalledTerminal() *stalledTerminal {
	return &stalledTerminal{released: make(chan struct{})}
}

func (s *stalledTerminal) release() { s.once.Do(func() { close(s.released) }) }

func (s *stalledTerminal) Write(p []byte) (int, error) {
	<-s.released
	return s.Buffer.Write(p)
}

// slowTerminal takes rate bytes a second, and counts the lines it was
// given by prefix (the part before " | "), keeping those that start with
// keep.
type slowTerminal struct {
	rate int
	keep string

	mu    sync.Mutex
	count map[string]int
	kept  []string
}

func (s *slowTerminal) Write(p []byte) (int, error) {
	time.Sleep(time.Duration(len(p)) * time.Second / time.Duration(s.rate)) // the terminal's speed
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		head, _, _ := strings.Cut(line, " | ")
		s.count[head]++
		if strings.HasPrefix(line, s.keep) {
			s.kept = append(s.kept, line)
		}
	}
	return len(p), nil
}

func (s *slowTerminal) lines(head string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[head]
}

// keptMatching counts the kept lines that match re.
func (s *slowTerminal) keptMatching(re *regexp.Regexp) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, line := range s.kept {
		if re.MatchString(line) {
			n++
		}
	}
	return n
}

// TestProcessOutputNeverWaitsForTheTerminal: a function's handler that
// prints while the shared terminal takes nothing is not held up (its
// output pipe is always drained), its process stops without waiting for
// the terminal, and once the terminal takes lines again it gets what was
// kept, whole lines only, and one line saying how many were dropped, which
// together account for every line printed.
func TestProcessOutputNeverWaitsForTheTerminal(t *testing.T) {
	ctx := context.Background()
	term := newStalledTerminal()
	pool := supervisor.NewPool("default/victim", supervisor.NewSyncWriter(term), supervisor.PoolConfig{
		DrainDelay: 10 * time.Millisecond,
		DrainGrace: 5 * time.Second,
	})
	t.Cleanup(pool.Stop)
	t.Cleanup(term.release) // before Stop: a failed test leaves nothing waiting
	require.NoError(t, pool.Update(ctx, spec("print", "v1")))
	require.NoError(t, pool.Scale(ctx, 1))

	// 20,000 lines of 100 bytes: 2 MB, 30 times what a pipe holds.
	const printed = 20000
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := client.Get("http://" + pool.Endpoints()[0] + fmt.Sprintf("/print?n=%d&size=100", printed))
	require.NoError(t, err, "the handler prints without waiting for the terminal")
	resp.Body.Close()
	t.Logf("printed %d lines in %s", printed, time.Since(start))

	stopped := make(chan struct{})
	go func() {
		pool.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("stopping the process waited for the terminal")
	}

	term.release()
	dropped := regexp.MustCompile(`(?m)^default/victim-1 \| kfn: (\d+) lines? dropped`)
	line := regexp.MustCompile(`(?m)^default/victim-1 \| line \d+ x+$`)
	require.Eventually(t, func() bool {
		m := dropped.FindStringSubmatch(term.String())
		if m == nil {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		// The host printed one line more, "draining", at SIGTERM.
		out := term.String()
		return n+len(line.FindAllString(out, -1))+strings.Count(out, "| draining\n") == printed+1
	}, 20*time.Second, 10*time.Millisecond, "the lines written and the count of those dropped make all printed")
	out := term.String()
	assert.Len(t, dropped.FindAllString(out, -1), 1, "one line says how many were dropped")
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(l, "default/victim-1 | line ") {
			require.Len(t, l, len("default/victim-1 | ")+100, "only whole lines: %.60q", l)
		}
	}
}

// TestNoisyFunctionDoesNotDelayAnotherFunctionsLines: two processes of a
// function printing 64 KiB lines faster than a slow terminal (10 MB/s)
// takes them do not make another function's lines wait behind their
// backlog: the other function's 1,000 lines of 100 bytes reach the
// terminal within 5 s (its fair share of the terminal takes them in well
// under a second; behind the backlog, a line at a time after each of the
// noisy processes' lines, they took 13 s).
func TestNoisyFunctionDoesNotDelayAnotherFunctionsLines(t *testing.T) {
	ctx := context.Background()
	term := &slowTerminal{rate: 10 << 20, keep: "default/victim-1 | ", count: map[string]int{}}
	out := supervisor.NewSyncWriter(term)
	cfg := supervisor.PoolConfig{DrainDelay: 10 * time.Millisecond, DrainGrace: 5 * time.Second}
	noisy := supervisor.NewPool("default/noisy", out, cfg)
	t.Cleanup(noisy.Stop)
	victim := supervisor.NewPool("default/victim", out, cfg)
	t.Cleanup(victim.Stop)
	require.NoError(t, noisy.Update(ctx, spec("noisy", "v1")))
	require.NoError(t, noisy.Scale(ctx, 2))
	require.NoError(t, victim.Update(ctx, spec("print", "v1")))
	require.NoError(t, victim.Scale(ctx, 1))
	require.Eventually(t, func() bool { return term.lines("default/noisy-1")+term.lines("default/noisy-2") >= 20 },
		20*time.Second, 5*time.Millisecond, "the noisy function keeps the terminal busy")

	const printed = 1000
	done := make(chan error, 1)
	go func() {
		client := &http.Client{Timeout: time.Minute}
		resp, err := client.Get("http://" + victim.Endpoints()[0] + fmt.Sprintf("/print?n=%d&size=100", printed))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	line := regexp.MustCompile(`^default/victim-1 \| line \d+ x+\n$`)
	start := time.Now()
	if !assert.Eventually(t, func() bool { return term.keptMatching(line) == printed }, 5*time.Second, 5*time.Millisecond,
		"the other function's lines reach the terminal within 5 s") {
		t.Fatalf("%d of the other function's %d lines on the terminal after %s", term.keptMatching(line), printed, time.Since(start))
	}
	t.Logf("%d lines on the terminal after %s", printed, time.Since(start))
	require.NoError(t, <-done)
}

// TestProcessEndsWhileAnEscapedChildHoldsItsOutput: a host that exits
// while a child it started outside its process group still holds its
// stdout is done within a few seconds (the supervisor stops reading its
// output then), not when that child ends.
func TestProcessEndsWhileAnEscapedChildHoldsItsOutput(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("reads process states from /proc")
	}
	pidFile := filepath.Join(t.TempDir(), "child")
	s := spec("escape", "v1")
	s.Env = append(s.Env, "CHILD_PID_FILE="+pidFile)
	p, err := supervisor.Start(s, supervisor.NewSyncWriter(&bytes.Buffer{}))
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(string(b))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	require.True(t, running(child), "the escaped child runs")

	_, _ = get(t, p.Addr(), "exit")
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the process is not done while a child it started outside its group holds its output")
	}
	assert.True(t, running(child), "the escaped child still runs: the process was done without its end")
}

// TestPoolStopTellsItsNameOnceItsOutputIsWritten: OnStopped is called
// once, with the pool's name, after the last lines of its processes (the
// host's "draining", printed at SIGTERM) were written, so that what is
// kept of them can be forgotten for good.
func TestPoolStopTellsItsNameOnceItsOutputIsWritten(t *testing.T) {
	ctx := context.Background()
	var out logtest.Buffer
	var stopped []string
	var outAtStop string
	pool := supervisor.NewPool("default/fn", supervisor.NewSyncWriter(&out), supervisor.PoolConfig{
		DrainDelay: 10 * time.Millisecond,
		OnStopped: func(name string) {
			stopped = append(stopped, name)
			outAtStop = out.String()
		},
	})
	require.NoError(t, pool.Update(ctx, spec("ok", "v1")))
	require.NoError(t, pool.Scale(ctx, 1))
	assert.Empty(t, stopped)
	pool.Stop()
	pool.Stop()
	assert.Equal(t, []string{"default/fn"}, stopped)
	assert.Contains(t, outAtStop, "default/fn-1 | draining\n")
}
