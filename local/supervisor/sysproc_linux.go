package supervisor

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts a function process in its own process group, so Stop
// reaches everything it started, and has the kernel kill it if kfn dies
// without stopping it (no orphans after kill -9 of kfn).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// reap waits for cmd's process to exit, kills whatever is left in its
// process group, and then reaps it, returning cmd.Wait's error. The group
// is killed while the process is still a zombie: until it is reaped, its
// pid, which is the group's id, cannot go to another process, so the
// signal cannot reach a group that is not this one.
func reap(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break // exited, or not waitable: cmd.Wait says which
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return cmd.Wait()
}
