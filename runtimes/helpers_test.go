package runtimes_test

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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/testenv"
	"github.com/kfn-dev/kfn/test/testport"
)

// hostDir holds the host files written once for the whole test binary.
var hostDir string

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "kfn-runtimes-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hostDir, err = runtimes.WriteHost(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

var (
	interpreterMu    sync.Mutex
	interpreterCache = map[string]string{}
)

// interpreter returns the absolute path of rt's interpreter. Version-manager
// shims (pyenv, nvm) are resolved to the real binary, which starts much
// faster. A missing interpreter skips the test, or fails it under CI=true
// (package testenv).
func interpreter(t testing.TB, rt runtimes.Runtime) string {
	t.Helper()
	interpreterMu.Lock()
	defer interpreterMu.Unlock()
	key := rt.Interpreter
	if rt.Language == runtimes.Python && rt.API == runtimes.RequestAPI {
		key += "+flask"
	}
	if p, ok := interpreterCache[key]; ok {
		return p
	}
	path := testenv.LookPath(t, rt.Interpreter)
	var probe []string
	if rt.Language == runtimes.Python {
		probe = []string{"-c", "import sys; print(sys.executable)"}
	} else {
		probe = []string{"-p", "process.execPath"}
	}
	out, err := exec.Command(path, probe...).Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		path = strings.TrimSpace(string(out))
	}
	if key != rt.Interpreter {
		path = flaskPython(t, path)
	}
	interpreterCache[key] = path
	return path
}

// flaskPython returns a python3 that imports Flask, which python314's host
// needs: first, else Debian's /usr/bin/python3 (make test installs
// python3-flask there when it is missing: hack/test-packages.sh).
func flaskPython(t testing.TB, first string) string {
	t.Helper()
	var err error
	for _, p := range []string{first, "/usr/bin/python3"} {
		var out []byte
		if out, err = exec.Command(p, "-c", "import flask").CombinedOutput(); err == nil {
			return p
		}
		err = fmt.Errorf("%s: %w: %s", p, err, strings.TrimSpace(string(out)))
	}
	testenv.Missing(t, "Flask for python3 (Debian: python3-flask)", err)
	return ""
}

// bottlePython returns a python3 that imports bottle and cheroot, the
// server of Kyma's python312 runtime: the one in PATH, else Debian's
// /usr/bin/python3 (make test installs python3-bottle and python3-cheroot
// there: hack/test-packages.sh). Without one the test skips, or fails
// under CI=true.
func bottlePython(t testing.TB) string {
	t.Helper()
	var err error
	for _, p := range []string{interpreter(t, lookup(t, "python312")), "/usr/bin/python3"} {
		var out []byte
		if out, err = exec.Command(p, "-c", "import bottle, cheroot").CombinedOutput(); err == nil {
			return p
		}
		err = fmt.Errorf("%s: %w: %s", p, err, strings.TrimSpace(string(out)))
	}
	testenv.Missing(t, "bottle and cheroot for python3 (Debian: python3-bottle, python3-cheroot)", err)
	return ""
}

// lookup returns the catalog entry, failing the test if it is missing.
func lookup(t testing.TB, name string) runtimes.Runtime {
	t.Helper()
	rt, err := runtimes.Lookup(name)
	require.NoError(t, err)
	return rt
}

// testRuntimes are the runtimes the contract runs against: one per host.
func testRuntimes(t testing.TB) []runtimes.Runtime {
	return []runtimes.Runtime{lookup(t, "nodejs22"), lookup(t, "python312")}
}

// fixture returns the directory of a test function: testdata/<language>
// for the event API, testdata/<runtime> (nodejs26, python314) for the
// request API.
func fixture(t testing.TB, rt runtimes.Runtime, name string) string {
	t.Helper()
	group := string(rt.Language)
	if rt.API == runtimes.RequestAPI {
		group = rt.Name
	}
	dir, err := filepath.Abs(filepath.Join("testdata", group, name))
	require.NoError(t, err)
	return dir
}

// syncBuffer collects a process's output; safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// host is a running host process.
type host struct {
	t      testing.TB
	rt     runtimes.Runtime
	URL    string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // the process's exit error, set when exited is closed
}

type hostOptions struct {
	cfg runtimes.Config
	env map[string]string
	// usePort makes the host bind FUNC_PORT (a free port) instead of
	// serving an inherited listening socket.
	usePort bool
	// noWait returns without waiting for /healthz.
	noWait bool
	// interpreterArgs come before the host's own arguments (python3 -S:
	// no site-packages).
	interpreterArgs []string
	// interpreter replaces the runtime's interpreter (a python3 that has
	// bottle, say).
	interpreter string
	// pid1 runs the host as PID 1 of a PID namespace of its own (unshare),
	// as in a container: signals it has no handler for are ignored.
	pid1 bool
}

// startHost starts rt's host serving the function in fnDir and waits until
// /healthz answers 200. The process is stopped when the test ends.
func startHost(t testing.TB, rt runtimes.Runtime, fnDir string, opts hostOptions) *host {
	t.Helper()
	cfg := opts.cfg
	cfg.FunctionDir = fnDir
	cfg.HostDir = hostDir
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	var port int
	var files []*os.File
	if opts.usePort {
		port = testport.Port(t)
		cfg.Port = port
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port = ln.Addr().(*net.TCPAddr).Port
		f, err := ln.(*net.TCPListener).File()
		require.NoError(t, err)
		require.NoError(t, ln.Close())
		files = append(files, f)
		cfg.ListenFD = 3
	}
	env, err := rt.Env(cfg)
	require.NoError(t, err)

	argv := rt.Command(hostDir)
	path := opts.interpreter
	if path == "" {
		path = interpreter(t, rt)
	}
	args := append(slices.Clone(opts.interpreterArgs), argv[1:]...)
	if opts.pid1 {
		args = append([]string{"--pid", "--fork", "--kill-child", path}, args...)
		path = testenv.LookPath(t, "unshare")
	}
	cmd := exec.Command(path, args...)
	cmd.Env = processEnv(append(rt.ImageEnv(), env...), opts.env)
	cmd.ExtraFiles = files
	out := &syncBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	require.NoError(t, cmd.Start())
	for _, f := range files {
		f.Close()
	}
	h := &host{t: t, rt: rt, URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		h.err = cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(h.stop)
	if !opts.noWait {
		h.waitReady(15 * time.Second)
	}
	return h
}

// logged asserts that the host's output comes to hold want: the output
// is copied from the host's pipe on a goroutine of os/exec's, in no order
// with the answers the test reads.
func (h *host) logged(t *testing.T, want string, msgAndArgs ...any) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return strings.Contains(h.out.String(), want) }, 5*time.Second, 5*time.Millisecond, msgAndArgs...) {
		t.Logf("the host's output does not hold %q:\n%s", want, h.out.String())
	}
}

// processEnv is the test process's environment without any platform
// variable, plus the host's env and extra variables.
func processEnv(env []runtimes.EnvVar, extra map[string]string) []string {
	reserved := runtimes.PlatformEnvNames()
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(reserved, name) {
			out = append(out, kv)
		}
	}
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}

var probeClient = &http.Client{Timeout: time.Second}

// waitReady polls the readiness path until it answers 200 (the handler is
// loaded), the process exits or the bound passes.
func (h *host) waitReady(bound time.Duration) time.Duration {
	h.t.Helper()
	return h.waitFor(runtimes.ReadyPath, bound)
}

// waitServing polls /healthz until it answers 200 (the host serves, with
// or without its handler), the process exits or the bound passes.
func (h *host) waitServing(bound time.Duration) time.Duration {
	h.t.Helper()
	return h.waitFor(runtimes.HealthPath, bound)
}

func (h *host) waitFor(path string, bound time.Duration) time.Duration {
	h.t.Helper()
	start := time.Now()
	deadline := start.Add(bound)
	for {
		resp, err := probeClient.Get(h.URL + path)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		select {
		case <-h.exited:
			h.t.Fatalf("%s host exited before it was ready: %v\n%s", h.rt.Name, h.err, h.out)
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s host not ready after %s\n%s", h.rt.Name, bound, h.out)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// signal sends sig to the host process.
func (h *host) signal(sig syscall.Signal) {
	h.t.Helper()
	require.NoError(h.t, h.cmd.Process.Signal(sig))
}

// signalInit sends sig to the host started with hostOptions.pid1: PID 1 of
// its namespace, the child of unshare.
func (h *host) signalInit(sig syscall.Signal) {
	h.t.Helper()
	pid := h.cmd.Process.Pid
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	require.NoError(h.t, err)
	fields := strings.Fields(string(children))
	require.Len(h.t, fields, 1, "unshare's child")
	child, err := strconv.Atoi(fields[0])
	require.NoError(h.t, err)
	require.NoError(h.t, syscall.Kill(child, sig))
}

// waitExit waits for the process to exit within bound and returns its exit code.
func (h *host) waitExit(bound time.Duration) int {
	h.t.Helper()
	select {
	case <-h.exited:
	case <-time.After(bound):
		h.t.Fatalf("%s host did not exit within %s\n%s", h.rt.Name, bound, h.out)
	}
	var exitErr *exec.ExitError
	if errors.As(h.err, &exitErr) {
		return exitErr.ExitCode()
	}
	require.NoError(h.t, h.err)
	return 0
}

func (h *host) stop() {
	select {
	case <-h.exited:
		return
	default:
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
}

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   string
}

var client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 16},
	// Redirects are answers under test, not to be followed.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends a request to the host and reads the whole answer.
func (h *host) do(method, path string, header map[string]string, body io.Reader) (response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.URL+path, body)
	if err != nil {
		return response{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// mustDo is do that fails the test on a transport error.
func (h *host) mustDo(method, path string, header map[string]string, body string) response {
	h.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	resp, err := h.do(method, path, header, r)
	require.NoError(h.t, err, "%s %s\n%s", method, path, h.out)
	return resp
}
