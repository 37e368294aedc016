package supervisor

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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/internal/tail"
)

// ErrNotReady is wrapped by WaitReady's error when a process exits or times
// out before it answers its health check.
var ErrNotReady = errors.New("process did not become ready")

// Spec is how to run one process of a function.
type Spec struct {
	// Argv is the command, executable first. Required.
	Argv []string
	// Env is the process environment as KEY=VALUE. The supervisor adds
	// KFN_LISTEN_FD; nothing of the supervisor's own environment is
	// inherited except PATH, HOME and the locale.
	Env []string
	// Dir is the working directory; empty means the supervisor's.
	Dir string
	// RunDir, when set, gives every process a directory of its own, as a
	// pod's emptyDir: created empty under RunDir before the process starts,
	// its working directory (instead of Dir), its path in the variable
	// RunDirEnv (replacing any value Env has), and removed once the process
	// has exited.
	RunDir    string
	RunDirEnv string
	// HealthPath answers 200 once the process is ready for traffic, and
	// 500 (with the reason) when it serves but never will be (a function
	// host whose handler did not load); default /healthz.
	HealthPath string
}

// listenFDEnv is the variable through which the host learns the inherited
// socket (runtimes.EnvListenFD); fd 3 is the first of ExtraFiles.
const listenFDEnv = "KFN_LISTEN_FD=3"

// Process is one running function host.
type Process struct {
	cmd     *exec.Cmd
	addr    string
	health  string
	runDir  string
	done    chan struct{}
	exitErr error
	stderr  *tail.Buffer
}

// Start opens a listening socket on a free loopback port, starts the
// process with that socket inherited (so it never races for a port), and
// returns at once; use WaitReady before sending it traffic. Output lines go
// to out, whole, and the process never waits for out: its lines wait for
// it in a queue bounded in bytes, past which they are dropped and counted
// (see SyncWriter; several processes writing to one out share it fairly
// when out is a SyncWriter). The process is in its own process group,
// which is killed when the process exits (what the host started goes with
// it, as in a container), and the process is killed if the supervisor
// dies. It is done at most a few seconds after it exited even when a
// child that left its group still holds its output; its last lines may
// reach out after that.
func Start(spec Spec, out io.Writer) (*Process, error) {
	return start(spec, syncWriterFor(out).newShare().newSource(""))
}

// start is Start with the process's lines going to out.
func start(spec Spec, out *source) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("start process: empty command")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start %s: listen: %w", spec.Argv[0], err)
	}
	file, err := ln.(*net.TCPListener).File()
	addr := ln.Addr().String()
	_ = ln.Close() // the duplicate in file keeps the socket open
	if err != nil {
		return nil, fmt.Errorf("start %s: socket file: %w", spec.Argv[0], err)
	}
	defer file.Close()

	stderr := tail.New(4096)
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append(baseEnv(), spec.Env...)
	runDir := ""
	if spec.RunDir != "" {
		if runDir, err = newRunDir(spec.RunDir); err != nil {
			return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
		}
		cmd.Dir = runDir
		cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, spec.RunDirEnv+"=") })
		cmd.Env = append(cmd.Env, spec.RunDirEnv+"="+runDir)
	}
	cmd.Env = append(cmd.Env, listenFDEnv)
	cmd.ExtraFiles = []*os.File{file}
	// Separate splitters, so that stdout's and stderr's lines do not mix
	// in pieces; neither waits for the output's writer.
	stdoutLines := &Lines{Max: maxLine, Line: out.push}
	stderrLines := &Lines{Max: maxLine, Line: out.push}
	cmd.Stdout = stdoutLines
	cmd.Stderr = io.MultiWriter(stderrLines, stderr)
	cmd.WaitDelay = waitDelay
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		if runDir != "" {
			_ = os.RemoveAll(runDir)
		}
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	health := spec.HealthPath
	if health == "" {
		health = "/healthz"
	}
	p := &Process{cmd: cmd, addr: addr, health: health, runDir: runDir, done: make(chan struct{}), stderr: stderr}
	go func() {
		p.exitErr = reap(cmd) // and whatever the host started in its group
		// The pipes are read to their end (or closed after waitDelay): what
		// is left is a last line without a newline.
		_ = stdoutLines.flush()
		_ = stderrLines.flush()
		out.close()
		if runDir != "" {
			_ = os.RemoveAll(runDir)
		}
		close(p.done)
	}()
	return p, nil
}

// newRunDir makes an empty directory of a process's own under parent.
func newRunDir(parent string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "p-")
	if err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	return dir, nil
}

// RunDir is the process's own directory (see Spec.RunDir), "" without one.
// It is removed once the process has exited (before Done is closed).
func (p *Process) RunDir() string { return p.runDir }

// baseEnv is what a function process inherits from kfn: enough to find
// interpreters and behave, nothing that would make local runs differ from
// the cluster.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Addr is host:port where the process serves.
func (p *Process) Addr() string { return p.addr }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited. It is always closed
// eventually after Stop, so it is safe to wait on.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError is how the process ended, once Done is closed.
func (p *Process) ExitError() error {
	select {
	case <-p.done:
		return p.exitErr
	default:
		return nil
	}
}

// MaxHealthHeaderBytes bounds the headers of a health check's answer: a
// function's host is tenant code, and an answer past it is no answer.
const MaxHealthHeaderBytes = 16 << 10

// WaitReady polls the health path until it answers 200. The error wraps
// ErrNotReady and quotes the end of the process's stderr when the process
// exits first or ctx ends first, or the health path's answer when it is
// 500 (the process will not become ready; the host's answer says why).
func (p *Process) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, MaxResponseHeaderBytes: MaxHealthHeaderBytes}}
	url := "http://" + p.addr + p.health
	delay := 5 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("health check: %w", err)
		}
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				return nil
			case http.StatusInternalServerError:
				// The host says why (its output, the whole trace, is in
				// the function's log already).
				return fmt.Errorf("%w: %s", ErrNotReady, bytes.TrimSpace(body))
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w: exited (%v): %s", ErrNotReady, p.exitErr, lastWords(p.stderr))
		case <-ctx.Done():
			return fmt.Errorf("%w: %w: %s", ErrNotReady, ctx.Err(), lastWords(p.stderr))
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// Stop asks the process group to finish (SIGTERM: the host drains in-flight
// requests), and kills it after grace. It returns when the process has
// exited, and reports whether it had to be killed; the exit caused by the
// signals is not an error.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	select {
	case <-p.done:
		return false
	default:
	}
	signalGroup(p.cmd, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		killed = true
		signalGroup(p.cmd, syscall.SIGKILL)
		<-p.done
	}
	return killed
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// lastWords quotes the end of a process's stderr for an error message.
func lastWords(stderr *tail.Buffer) string {
	if s := strings.TrimSpace(stderr.String()); s != "" {
		return s
	}
	return "(no output)"
}
