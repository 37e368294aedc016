//go:build !linux

package supervisor

import "syscall"

// sysProcAttr puts a function process in its own process group, so Stop
// reaches everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
