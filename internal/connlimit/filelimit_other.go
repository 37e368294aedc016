//go:build !unix

package connlimit

// fileLimit is the process's file limit where there is no RLIMIT_NOFILE:
// the C runtime's usual default.
func fileLimit() int { return 512 }
