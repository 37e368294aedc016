package supervisor

import "syscall"

// sysProcAttr puts a function process in its own process group, so Stop
// reaches everything it started, and has the kernel kill it if kfn dies
// without stopping it (no orphans after kill -9 of kfn).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
