//go:build unix

package connlimit

import (
	"math"
	"syscall"
)

// fileLimit is the process's soft RLIMIT_NOFILE (Go raised it to the hard
// limit at start), or 1,024 when it cannot be read.
func fileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return int(min(lim.Cur, math.MaxInt32))
}
