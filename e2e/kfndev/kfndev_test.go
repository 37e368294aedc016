// Package kfndev_test runs `kfn dev` as a user does: the built binary, on a
// copy of examples/shop, driven over HTTP and with the kfn CLI.
package kfndev_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kfnBinary builds cmd/kfn once for the package's tests; with
// KFN_E2E_RACE=1 it is built with the race detector, and a race makes kfn
// dev exit 66, which the Ctrl-C check reports with the end of its output.
var kfnBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "kfn-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kfn")
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", bin}
	if os.Getenv("KFN_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/kfn")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build kfn: %v\n%s", err, out)
	}
	return bin, nil
})

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/kfn-dev/kfn\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no github.com/kfn-dev/kfn go.mod above the test")
		}
		dir = parent
	}
}

// devProcess is a running `kfn dev`.
type devProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *lockedBuffer) add(line string) {
	b.mu.Lock()
	b.sb.WriteString(line + "\n")
	b.mu.Unlock()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

var upLine = regexp.MustCompile(`is up on http://(\S+) `)

// startDev runs `kfn dev` on dir and waits until it says it is up.
func startDev(t *testing.T, dir string, extra ...string) *devProcess {
	t.Helper()
	return startDevEnv(t, dir, nil, extra...)
}

// startDevEnv is startDev with env added to kfn dev's environment.
func startDevEnv(t *testing.T, dir string, env []string, extra ...string) *devProcess {
	t.Helper()
	bin, err := kfnBinary()
	require.NoError(t, err)
	args := append([]string{"dev", "--addr", "127.0.0.1:0", "--plain"}, extra...)
	cmd := exec.Command(bin, append(args, dir)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return runDev(t, cmd)
}

// runDev starts cmd, a `kfn dev` command, and waits until it says it is up.
func runDev(t *testing.T, cmd *exec.Cmd) *devProcess {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	p := &devProcess{t: t, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	up := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.out.add(line)
			if m := upLine.FindStringSubmatch(line); m != nil {
				select {
				case up <- m[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case p.addr = <-up:
	case <-p.done:
		t.Fatalf("kfn dev exited before it was up:\n%s", p.out)
	case <-time.After(120 * time.Second):
		t.Fatalf("kfn dev was not up within 2 minutes:\n%s", p.out)
	}
	return p
}

func (p *devProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// interrupt sends Ctrl-C and waits for kfn dev to exit.
func (p *devProcess) interrupt() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(os.Interrupt))
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("kfn dev did not stop within a minute of Ctrl-C:\n%s", p.out)
	}
	require.True(p.t, p.cmd.ProcessState.Success(), "kfn dev exits 0 on Ctrl-C, not %v; the end of its output:\n%s", p.cmd.ProcessState, lastLines(p.out.String(), 60))
}

// lastLines returns the last n lines of s: what a failure message needs
// when the whole output would be cut short by the test log.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// children returns the pids of every process below pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			parent[n] = ppid
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

// kfn runs the kfn command line against the process and returns its
// output. It returns every error, never stops the test: conditions of
// Eventually call it, in a goroutine of their own.
func (p *devProcess) kfn(args ...string) (string, error) {
	bin, err := kfnBinary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KFN_ADDR=http://"+p.addr)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type status struct {
	Functions []struct {
		Name     string `json:"name"`
		Replicas int    `json:"replicas"`
		Ready    int    `json:"ready"`
	} `json:"functions"`
}

func (p *devProcess) replicas(fn string) int {
	out, err := p.kfn("get", "-o", "json")
	if err != nil {
		return -1
	}
	var st status
	if json.Unmarshal([]byte(out), &st) != nil {
		return -1
	}
	for _, f := range st.Functions {
		if f.Name == fn {
			return f.Replicas
		}
	}
	return -1
}

func copyExample(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	require.NoError(t, err)
	src := filepath.Join(root, "examples", "shop")
	dst := t.TempDir()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == ".kfn" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	}))
	return dst
}

func postOrder(client *http.Client, addr, id string) (int, error) {
	resp, err := client.Post("http://"+addr+"/default/orders", "application/json", strings.NewReader(fmt.Sprintf(`{"id":%q,"item":"book"}`, id)))
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

var notified = regexp.MustCompile(`\| notified order (\S+) via email`)

func notifiedIDs(out string) map[string]bool {
	ids := map[string]bool{}
	for _, m := range notified.FindAllStringSubmatch(out, -1) {
		ids[m[1]] = true
	}
	return ids
}

// TestKfnDevAsAUserWould is the scenario of the README's `make dev`.
func TestKfnDevAsAUserWould(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	dir := copyExample(t)
	dev := startDev(t, dir, "--cooldown", "2s")
	client := &http.Client{Timeout: 30 * time.Second}

	t.Run("an HTTP invoke answers", func(t *testing.T) {
		out, err := dev.kfn("invoke", "orders", "--data", `{"id":"invoke-1","item":"book"}`)
		require.NoError(t, err, out)
		assert.JSONEq(t, `{"accepted":"invoke-1"}`, out)
	})

	t.Run("fulfil starts from zero on the first event", func(t *testing.T) {
		require.Eventually(t, func() bool { return notifiedIDs(dev.out.String())["invoke-1"] }, 60*time.Second, 50*time.Millisecond,
			"the order reached notify through fulfil:\n%s", dev.out)
		assert.Contains(t, dev.out.String(), `function=default/fulfil from=0 to=1`)
	})

	t.Run("kfn trace prints a published event's path through the chain", func(t *testing.T) {
		out, err := dev.kfn("publish", "--type", "order.created.v1", "--source", "shop", "--id", "trace-1", "--data", `{"id":"trace-1","item":"pen"}`)
		require.NoError(t, err, out)
		// Published, delivered to fulfil, which emitted order.fulfilled.v1,
		// delivered to notify: each hop once settled.
		want := []string{
			"published trace-1 (order.created.v1 from shop, stream sequence ",
			"<- this event",
			"-> default/fulfil at default/fulfil: delivered after 1 attempt [#1 200 in ",
			"emitted ",
			"(order.fulfilled.v1 from ",
			"-> default/notify at default/notify: delivered after 1 attempt [#1 200 in ",
		}
		require.Eventually(t, func() bool {
			out, err = dev.kfn("trace", "trace-1")
			if err != nil {
				return false
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					return false
				}
			}
			return true
		}, 60*time.Second, 200*time.Millisecond, "kfn trace trace-1:\n%s", out)
		assert.Regexp(t, `^chain of trace [0-9a-f]{32}\n`, out)

		out, err = dev.kfn("trace", "trace-1", "--source", "elsewhere")
		require.Error(t, err, "another source's trace-1 is none")
		assert.Contains(t, out, `no event "trace-1" of source "elsewhere" among the 1000 most recent events kfn dev keeps`)
		out, err = dev.kfn("trace", "trace-1", "-o", "json")
		require.NoError(t, err, out)
		assert.Contains(t, out, `"id": "trace-1"`)
	})

	t.Run("fulfil returns to zero after the cooldown", func(t *testing.T) {
		require.Eventually(t, func() bool { return dev.replicas("fulfil") == 0 }, 60*time.Second, 200*time.Millisecond)
	})

	t.Run("500 orders all reach notify through the chain", func(t *testing.T) {
		const n = 500
		var wg sync.WaitGroup
		var failed atomic.Int32
		sem := make(chan struct{}, 8)
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				code, err := postOrder(client, dev.addr, "bulk-"+strconv.Itoa(i))
				if err != nil || code != http.StatusAccepted {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		require.Zero(t, failed.Load(), "every order was accepted")
		require.Eventually(t, func() bool {
			ids := notifiedIDs(dev.out.String())
			for i := 0; i < n; i++ {
				if !ids["bulk-"+strconv.Itoa(i)] {
					return false
				}
			}
			return true
		}, 120*time.Second, 100*time.Millisecond, "all %d orders notified", n)
	})

	t.Run("an edit to a handler under load drops no request", func(t *testing.T) {
		stop := make(chan struct{})
		var sent, bad atomic.Int32
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					code, err := postOrder(client, dev.addr, fmt.Sprintf("edit-%d-%d", w, i))
					sent.Add(1)
					if err != nil || code != http.StatusAccepted {
						bad.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprintf("code %d err %v", code, err))
					}
				}
			}()
		}
		handler := filepath.Join(dir, "orders", "handler.js")
		src, err := os.ReadFile(handler)
		require.NoError(t, err)
		edited := strings.Replace(string(src), "return { accepted: order.id };", "return { accepted: order.id, version: 2 };", 1)
		require.NotEqual(t, string(src), edited)
		require.NoError(t, os.WriteFile(handler, []byte(edited), 0o644))
		require.Eventually(t, func() bool {
			out, err := dev.kfn("invoke", "orders", "--data", `{"id":"probe","item":"pen"}`)
			return err == nil && strings.Contains(out, `"version":2`)
		}, 60*time.Second, 100*time.Millisecond, "the new version serves")
		close(stop)
		wg.Wait()
		assert.Positive(t, sent.Load())
		assert.Zero(t, bad.Load(), "no request failed during the switch (first: %v)", firstErr.Load())
	})

	t.Run("Ctrl-C leaves no process behind", func(t *testing.T) {
		kids := children(dev.cmd.Process.Pid)
		require.NotEmpty(t, kids, "function processes run under kfn dev")
		dev.interrupt()
		for _, pid := range kids {
			assert.Error(t, syscall.Kill(pid, 0), "process %d outlived kfn dev", pid)
		}
	})
}

// TestPendingEventsSurviveARestart publishes events that wait for a
// function, stops kfn dev before they are all handled, starts it again,
// and finds every event delivered.
func TestPendingEventsSurviveARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	dir := copyExample(t)
	// notify is slow in this run, so events pile up for it.
	notify := filepath.Join(dir, "notify.yaml")
	src, err := os.ReadFile(notify)
	require.NoError(t, err)
	slow := strings.Replace(string(src), "        def main():\n", "        import time\n\n        def main():\n            time.sleep(0.5)\n", 1)
	require.NotEqual(t, string(src), slow)
	require.NoError(t, os.WriteFile(notify, []byte(slow), 0o644))

	first := startDev(t, dir)
	const n = 100
	for i := 0; i < n; i++ {
		req, err := http.NewRequest(http.MethodPost, "http://"+first.addr+"/publish", strings.NewReader(fmt.Sprintf(`{"id":"restart-%d","item":"book"}`, i)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Type", "order.fulfilled.v1")
		req.Header.Set("Ce-Source", "shop")
		req.Header.Set("Ce-Id", "restart-"+strconv.Itoa(i))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	first.interrupt()
	before := notifiedIDs(first.out.String())
	require.Less(t, len(before), n, "the test needs events still waiting at the stop")

	second := startDev(t, dir)
	require.Eventually(t, func() bool {
		ids := notifiedIDs(second.out.String())
		for id := range before {
			ids[id] = true
		}
		for i := 0; i < n; i++ {
			if !ids["restart-"+strconv.Itoa(i)] {
				return false
			}
		}
		return true
	}, 120*time.Second, 100*time.Millisecond, "every event was delivered, before or after the restart")
	second.interrupt()
}
