package singlenode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one of the node's programs, started detached from the caller
// (its own session) so that it outlives `go run ./test/node up`, with its output in
// StateDir/logs/NAME.log and its id in StateDir/pids/NAME.pid.
type process struct {
	name string
	path string
	args []string
}

// start starts p and records its process id and start time, so that stop
// never signals another process that reused the id.
func (c Config) start(p process) error {
	for _, d := range []string{c.path("logs"), c.path("pids")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	log, err := os.OpenFile(c.logPath(p.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.name, err)
	}
	defer log.Close()
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.Dir = c.StateDir
	cmd.Env = append(os.Environ(), "PATH="+processPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while this process lives; otherwise init does.
	go func() { _ = cmd.Wait() }()
	started, err := startTime(pid)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	record := fmt.Sprintf("%d %d\n", pid, started)
	return writeFile(filepath.Join(c.path("pids"), p.name+".pid"), []byte(record))
}

// processPath is the PATH of the node's programs: containerd finds its shim
// and runc, and kube-proxy iptables and conntrack, in the usual places even
// when the caller's PATH is short.
func processPath() string {
	path := os.Getenv("PATH")
	for _, d := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if !strings.Contains(":"+path+":", ":"+d+":") {
			path += ":" + d
		}
	}
	return strings.TrimPrefix(path, ":")
}

func (c Config) logPath(name string) string { return c.path("logs", name+".log") }

// running reports whether the process recorded under name is alive.
func (c Config) running(name string) bool {
	pid, ok := c.recorded(name)
	return ok && alive(pid)
}

// recorded returns the process id recorded under name if that process still
// runs the same program (same start time).
func (c Config) recorded(name string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(c.path("pids"), name+".pid"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	want, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	got, err := startTime(pid)
	if err != nil || got != want {
		return 0, false
	}
	return pid, true
}

// stop sends SIGTERM to the recorded process, and SIGKILL if it has not
// exited after grace. A process that is not running is not an error.
func (c Config) stop(name string, grace time.Duration) error {
	pid, ok := c.recorded(name)
	if !ok {
		return nil
	}
	return terminate(pid, grace)
}

// terminate stops pid: SIGTERM, then SIGKILL after grace.
func terminate(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	if waitGone(pid, grace) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process %d: %w", pid, err)
	}
	if !waitGone(pid, 10*time.Second) {
		return fmt.Errorf("process %d did not exit after SIGKILL", pid)
	}
	return nil
}

// waitGone polls until pid has exited (or is a zombie) or d has passed.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := statFields(data)
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// startTime is the process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat), which tells a process from a later one with the
// same id.
func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read process %d: %w", pid, err)
	}
	fields := statFields(data)
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("read process %d: short stat line", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// statFields returns the fields of a /proc/PID/stat line after the command
// name, which may itself contain spaces and parentheses.
func statFields(data []byte) []string {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}

// processesMentioning returns the ids of the processes whose command line
// contains s: the containerd shims of the cluster name its StateDir.
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := info.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	return string(buf)
}
