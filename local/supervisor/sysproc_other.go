//go:build !linux

package supervisor

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts a function process in its own process group, so Stop
// reaches everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// reap waits for cmd's process and then kills whatever is left in its
// process group. Without a wait that leaves the process unreaped, the
// group's id may in principle have gone to another process by then.
func reap(cmd *exec.Cmd) error {
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return err
}
