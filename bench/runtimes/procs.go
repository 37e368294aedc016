package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/internal/tail"
)

// target is one server under test: a kfn host or a plain anchor.
type target struct {
	name     string
	language string
	anchor   bool
	argv     []string
	env      []string
	// ready is the path whose 200 means the server is up.
	ready string
	// portEnv is the variable that sets the server's port.
	portEnv string
}

// server is a running target.
type server struct {
	t    target
	addr string
	cmd  *exec.Cmd
	done chan error
	out  *tail.Buffer // the last few KiB the process wrote, for error messages
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts t and returns once it answered its readiness path with 200,
// with how long that took from just before the process was started.
func start(t target, bound time.Duration) (*server, time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(t.argv[0], t.argv[1:]...)
	cmd.Env = append(append([]string(nil), t.env...), t.portEnv+"="+strconv.Itoa(port))
	s := &server{t: t, addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan error, 1), out: tail.New(8 << 10)}
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start %s: %w", t.name, err)
	}
	go func() { s.done <- cmd.Wait() }()
	for {
		if status, err := probe(s.addr, t.ready); err == nil && status == 200 {
			return s, time.Since(t0), nil
		}
		select {
		case err := <-s.done:
			return nil, 0, fmt.Errorf("%s exited before it was ready: %v\n%s", t.name, err, s.out.String())
		default:
		}
		if time.Since(t0) > bound {
			s.stop()
			return nil, 0, fmt.Errorf("%s not ready after %s\n%s", t.name, bound, s.out.String())
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// stop sends SIGTERM and waits for the process, killing it after 10 s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// runToExit runs argv and returns how long it took to exit successfully.
func runToExit(argv []string, env []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return time.Since(t0), nil
}

// realExecutable resolves an interpreter through version-manager shims
// (pyenv, nvm) to the binary itself, as a runtime image runs it.
func realExecutable(name string, probe ...string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(p, probe...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", p, strings.Join(probe, " "), err)
	}
	real := strings.TrimSpace(string(out))
	if real == "" {
		return "", errors.New("empty executable path from " + p)
	}
	return real, nil
}

// baseEnv is this process's environment without variables that would
// change what is measured.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PYTHONDONTWRITEBYTECODE", name == "NODE_OPTIONS", name == "PORT",
			strings.HasPrefix(name, "FUNC_"), strings.HasPrefix(name, "KFN_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

func execOutput(exe string, args ...string) ([]byte, error) {
	return exec.Command(exe, args...).CombinedOutput()
}
