package supervisor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/supervisor"
)

// The test binary doubles as a function host: with KFN_TEST_HOST set it
// serves on the inherited socket like the runtime hosts do. A fake host is
// used here, not node or python3, because these tests are about process
// handling (crashes on demand, exit codes, timing), which the real hosts'
// own tests and the kfn dev end-to-end test cover with real interpreters.
func TestMain(m *testing.M) {
	if mode := os.Getenv("KFN_TEST_HOST"); mode != "" {
		serve(mode)
		return
	}
	os.Exit(m.Run())
}

// startLingering starts a child of the host that never ends (mode
// "linger"), as set sets it up, and writes its pid to CHILD_PID_FILE.
func startLingering(set func(*exec.Cmd)) {
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "KFN_TEST_HOST=linger")
	set(child)
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := os.WriteFile(os.Getenv("CHILD_PID_FILE"), []byte(strconv.Itoa(child.Process.Pid)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func serve(mode string) {
	if mode == "linger" { // a process the host started, which never ends by itself
		select {}
	}
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "SyntaxError: Unexpected token '}'")
		os.Exit(1)
	}
	f := os.NewFile(3, "listener")
	ln, err := net.FileListener(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	version := os.Getenv("VERSION")
	if mode == "not-loaded" {
		fmt.Fprintln(os.Stderr, "kfn: User function not loaded")
	}
	mux := http.NewServeMux()
	if mode == "spawn" {
		// A child in the host's process group, as a handler's subprocess
		// would be.
		startLingering(func(*exec.Cmd) {})
	}
	if mode == "escape" {
		// A child out of the host's process group and session, holding
		// the host's stdout, as a handler's daemonized subprocess would:
		// killing the group does not end it, so the host's output pipe
		// never reaches its end.
		startLingering(func(child *exec.Cmd) {
			child.Stdout = os.Stdout
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		})
	}
	if mode == "noisy" {
		// A function printing a 64 KiB line every 2 ms, without end.
		go func() {
			pad := strings.Repeat("x", 64<<10-16)
			for i := 0; ; i++ {
				fmt.Printf("noisy %8d %s\n", i, pad)
				time.Sleep(2 * time.Millisecond) // a rate of output, not a wait
			}
		}()
	}
	// /print?n=N&size=S prints N lines of S bytes ("line <i> xxx") to
	// stdout, then answers; a handler's console.log or print blocks while
	// the host's stdout pipe is full.
	mux.HandleFunc("/print", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		for i := range n {
			head := fmt.Sprintf("line %d ", i)
			fmt.Println(head + strings.Repeat("x", max(size-len(head), 0)))
		}
		fmt.Fprint(w, "printed")
	})
	mux.HandleFunc("/exit", func(http.ResponseWriter, *http.Request) { os.Exit(0) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if mode == "not-loaded" && r.URL.Query().Has("ready") {
			http.Error(w, "User function not loaded: SyntaxError: Unexpected token '}'", http.StatusInternalServerError)
			return
		}
		if mode == "header-bomb" {
			w.Header().Set("X-Pad", strings.Repeat("x", 1<<20))
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/cwd", func(w http.ResponseWriter, r *http.Request) {
		wd, _ := os.Getwd()
		fmt.Fprint(w, wd+"\n"+os.Getenv("FN_DIR"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			time.Sleep(d)
		}
		fmt.Fprint(w, version)
	})
	srv := &http.Server{Handler: mux}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("draining")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	fmt.Println("serving", version)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		os.Exit(3)
	}
}

func spec(mode, version string) supervisor.Spec {
	return supervisor.Spec{
		Argv: []string{os.Args[0], "-test.run=^$"},
		Env:  []string{"KFN_TEST_HOST=" + mode, "VERSION=" + version},
	}
}

func get(t *testing.T, addr, query string) (string, error) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/" + query)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// running reports whether pid is a process that has not exited: neither
// gone nor a zombie waiting for whoever reaps orphans.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which may itself hold ") ".
	i := bytes.LastIndexByte(stat, ')')
	state := strings.TrimSpace(string(stat[i+1:]))
	return i >= 0 && !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X")
}

// TestProcessGroupGoesWithItsLeader: what a host started in its process
// group is killed when the host exits by itself, not only on Stop, as in a
// container whose main process ended.
func TestProcessGroupGoesWithItsLeader(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("reads process states from /proc")
	}
	pidFile := filepath.Join(t.TempDir(), "child")
	s := spec("spawn", "v1")
	s.Env = append(s.Env, "CHILD_PID_FILE="+pidFile)
	var out bytes.Buffer
	p, err := supervisor.Start(s, supervisor.NewSyncWriter(&out))
	require.NoError(t, err)
	defer p.Stop(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child, err := strconv.Atoi(string(b))
	require.NoError(t, err)
	require.True(t, running(child), "the host's child runs")
	t.Cleanup(func() {
		if running(child) {
			_ = syscall.Kill(child, syscall.SIGKILL) // the test failed: leave nothing behind
		}
	})

	_, _ = get(t, p.Addr(), "exit") // the host exits while answering
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not exit")
	}
	assert.Eventually(t, func() bool { return !running(child) }, 10*time.Second, 10*time.Millisecond,
		"the host's child outlived it")
}

func TestProcessStartReadyStop(t *testing.T) {
	var out bytes.Buffer
	p, err := supervisor.Start(spec("ok", "v1"), supervisor.NewSyncWriter(&out))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	body, err := get(t, p.Addr(), "")
	require.NoError(t, err)
	assert.Equal(t, "v1", body)

	p.Stop(5 * time.Second)
	<-p.Done()
	assert.False(t, alive(p.PID()))
	p.Stop(time.Second) // safe after exit
}

func TestProcessThatFailsReportsItsOutput(t *testing.T) {
	p, err := supervisor.Start(spec("fail", "v1"), io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = p.WaitReady(ctx)
	require.ErrorIs(t, err, supervisor.ErrNotReady)
	assert.Contains(t, err.Error(), "SyntaxError: Unexpected token '}'")
}

// TestProcessServingWithoutHandlerIsNotReady checks a host that serves but
// answers its readiness path 500 (a function whose handler did not load):
// WaitReady fails at once, with the answer, instead of waiting for its
// context to end.
func TestProcessServingWithoutHandlerIsNotReady(t *testing.T) {
	s := spec("not-loaded", "v1")
	s.HealthPath = "/healthz?ready"
	p, err := supervisor.Start(s, io.Discard)
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.WaitReady(ctx)
	require.ErrorIs(t, err, supervisor.ErrNotReady)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "User function not loaded: SyntaxError: Unexpected token '}'")
}

// TestProcessAnsweringMegabytesOfHeadersIsNotReady: the health check
// reads at most supervisor.MaxHealthHeaderBytes of an answer's headers (a
// function's host is tenant code), so a host that answers with a megabyte
// of them is never ready, and kfn dev holds none of it.
func TestProcessAnsweringMegabytesOfHeadersIsNotReady(t *testing.T) {
	p, err := supervisor.Start(spec("header-bomb", "v1"), io.Discard)
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = p.WaitReady(ctx)
	require.ErrorIs(t, err, supervisor.ErrNotReady)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestProcessRunDir checks that each process gets a directory of its own,
// empty, as a pod gets an emptyDir: its working directory and in its
// environment (replacing the spec's value), removed after it exited.
func TestProcessRunDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "run")
	s := spec("ok", "v1")
	s.Env = append(s.Env, "FN_DIR=/placeholder")
	s.RunDir, s.RunDirEnv = parent, "FN_DIR"
	var procs []*supervisor.Process
	for range 2 {
		p, err := supervisor.Start(s, io.Discard)
		require.NoError(t, err)
		t.Cleanup(func() { p.Stop(5 * time.Second) })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		require.NoError(t, p.WaitReady(ctx))
		cancel()
		procs = append(procs, p)
	}
	a, b := procs[0].RunDir(), procs[1].RunDir()
	assert.NotEqual(t, a, b, "one directory per process")
	for _, p := range procs {
		assert.Equal(t, parent, filepath.Dir(p.RunDir()))
		body, err := get(t, p.Addr(), "cwd")
		require.NoError(t, err)
		assert.Equal(t, p.RunDir()+"\n"+p.RunDir(), body, "working directory and variable")
	}
	require.NoError(t, os.WriteFile(filepath.Join(a, "written"), []byte("x"), 0o644))
	procs[0].Stop(5 * time.Second)
	<-procs[0].Done()
	assert.NoDirExists(t, a, "removed once the process exited")
	assert.DirExists(t, b)
}

func newPool(t *testing.T, out io.Writer, changes *atomic.Int32) *supervisor.Pool {
	t.Helper()
	pool := supervisor.NewPool("default/fn", supervisor.NewSyncWriter(out), supervisor.PoolConfig{
		DrainDelay: 200 * time.Millisecond,
		DrainGrace: 5 * time.Second,
		OnChange: func() {
			if changes != nil {
				changes.Add(1)
			}
		},
	})
	t.Cleanup(pool.Stop)
	return pool
}

func TestPoolScalesUpAndDown(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	pool := newPool(t, &out, nil)
	require.Error(t, pool.Scale(ctx, 1), "nothing to run before the first Update")
	require.NoError(t, pool.Update(ctx, spec("ok", "v1")))
	assert.Empty(t, pool.Endpoints(), "Update at zero replicas starts nothing")

	require.NoError(t, pool.Scale(ctx, 2))
	eps := pool.Endpoints()
	require.Len(t, eps, 2)
	for _, ep := range eps {
		body, err := get(t, ep, "")
		require.NoError(t, err)
		assert.Equal(t, "v1", body)
	}
	pids := pool.PIDs()

	require.NoError(t, pool.Scale(ctx, 0))
	assert.Empty(t, pool.Endpoints())
	require.Eventually(t, func() bool { return !alive(pids[0]) && !alive(pids[1]) }, 10*time.Second, 10*time.Millisecond)
	require.Error(t, pool.Scale(ctx, -1))
}

// TestPoolUpdateDropsNoRequest sends requests without pause while the
// version changes twice: every request is answered, first by v1, then v2,
// then v3, never by an error.
func TestPoolUpdateDropsNoRequest(t *testing.T) {
	ctx := context.Background()
	var changes atomic.Int32
	pool := newPool(t, io.Discard, &changes)
	require.NoError(t, pool.Update(ctx, spec("ok", "v1")))
	require.NoError(t, pool.Scale(ctx, 2))

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		seen    = map[string]int{}
		failure error
		stop    = make(chan struct{})
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				eps := pool.Endpoints()
				if len(eps) == 0 {
					mu.Lock()
					failure = errors.New("no endpoint during an update")
					mu.Unlock()
					return
				}
				resp, err := client.Get("http://" + eps[i%len(eps)] + "/?sleep=5ms")
				mu.Lock()
				if err != nil {
					failure = err
				} else {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					seen[string(body)]++
				}
				mu.Unlock()
			}
		}()
	}
	// Each version serves requests before the next replaces it, so every
	// update happens under load.
	served := func(version string, n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[version] >= n || failure != nil
		}, 20*time.Second, 5*time.Millisecond, "%s serves %d requests", version, n)
	}
	served("v1", 1)
	require.NoError(t, pool.Update(ctx, spec("ok", "v2")))
	served("v2", 1)
	require.NoError(t, pool.Update(ctx, spec("ok", "v3")))
	served("v3", 20)
	close(stop)
	wg.Wait()
	require.NoError(t, failure)
	assert.GreaterOrEqual(t, changes.Load(), int32(3))
}

func TestPoolKeepsOldVersionWhenNewOneFails(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, io.Discard, nil)
	require.NoError(t, pool.Update(ctx, spec("ok", "v1")))
	require.NoError(t, pool.Scale(ctx, 1))
	before := pool.Endpoints()

	err := pool.Update(ctx, spec("fail", "v2"))
	require.ErrorIs(t, err, supervisor.ErrNotReady)
	assert.Contains(t, err.Error(), "SyntaxError")
	assert.Equal(t, before, pool.Endpoints(), "the old version keeps serving")
	assert.ErrorIs(t, pool.LastError(), supervisor.ErrNotReady)
	body, err := get(t, before[0], "")
	require.NoError(t, err)
	assert.Equal(t, "v1", body)

	require.NoError(t, pool.Update(ctx, spec("ok", "v3")), "a fixed version replaces it")
	assert.NoError(t, pool.LastError())
}

func TestPoolRestartsACrashedProcess(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	pool := newPool(t, &out, nil)
	require.NoError(t, pool.Update(ctx, spec("ok", "v1")))
	require.NoError(t, pool.Scale(ctx, 1))
	victim := pool.PIDs()[0]
	require.NoError(t, syscall.Kill(victim, syscall.SIGKILL))

	require.Eventually(t, func() bool {
		pids := pool.PIDs()
		eps := pool.Endpoints()
		return len(pids) == 1 && pids[0] != victim && len(eps) == 1
	}, 20*time.Second, 10*time.Millisecond)
	body, err := get(t, pool.Endpoints()[0], "")
	require.NoError(t, err)
	assert.Equal(t, "v1", body)
}

func TestPoolStopLeavesNoProcess(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	pool := supervisor.NewPool("default/fn", supervisor.NewSyncWriter(&out), supervisor.PoolConfig{DrainDelay: time.Second})
	require.NoError(t, pool.Update(ctx, spec("ok", "v1")))
	require.NoError(t, pool.Scale(ctx, 2))
	require.NoError(t, pool.Update(ctx, spec("ok", "v2"))) // v1 is draining in the background
	var pids []int
	pids = append(pids, pool.PIDs()...)
	pool.Stop()
	for _, pid := range pids {
		assert.False(t, alive(pid), "pid %d outlived Stop", pid)
	}
	assert.ErrorIs(t, pool.Scale(ctx, 1), supervisor.ErrStopped)
	assert.ErrorIs(t, pool.Update(ctx, spec("ok", "v3")), supervisor.ErrStopped)
	assert.Contains(t, out.String(), "default/fn-1 | serving v1\n", "output lines are prefixed with the process name")
	assert.True(t, strings.Contains(out.String(), "| draining"))
}
