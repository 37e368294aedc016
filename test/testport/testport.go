package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// rangeFile holds the kernel's ephemeral port range ("32768	60999").
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// span is how many ports below the ephemeral range Port chooses from, and
// floor the lowest it chooses (well-known services such as the kubelet's
// 10250 stay out of reach).
const (
	span  = 12288
	floor = 16384
)

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports this process has returned
	held  []*os.File       // their lock files, open until the process exits
)

// lockDir holds a lock file per port given, shared by every test process
// on the machine.
var lockDir = filepath.Join(os.TempDir(), "kfn-testport")

// Port returns a TCP port that is free on every address (a server may
// listen on 127.0.0.1 or on all of them) and lies below the kernel's
// ephemeral range, so that no listener on port 0 and no outgoing
// connection takes it before the test's server listens on it, or between
// two runs of a server restarted on it. A process never gets the same port
// twice, and two test processes never get the same one while both run:
// each port given is locked (flock) in a file under the temp directory
// until the process exits. Where the range cannot be read or leaves no room below it, Port
// falls back to a port of the kernel's choosing, as net.Listen on port 0
// does, and the test is told so.
func Port(t testing.TB) int {
	t.Helper()
	lo, hi, err := candidates(rangeFile)
	mu.Lock()
	defer mu.Unlock()
	if err == nil {
		if p, ok := choose(lo, hi, rand.IntN(hi-lo), claim); ok {
			return p
		}
		err = fmt.Errorf("no free port in [%d, %d)", lo, hi)
	}
	t.Logf("testport: %v; using a port the kernel picks, which it may also give another socket", err)
	p, err := kernelPort()
	if err != nil {
		t.Fatalf("testport: %v", err)
	}
	given[p] = true
	return p
}

// Addr returns "127.0.0.1:PORT" with a port from Port.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// candidates reads the ephemeral range from file and returns the ports
// [lo, hi) below it that Port chooses from.
func candidates(file string) (lo, hi int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, fmt.Errorf("read the ephemeral port range: %w", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0, fmt.Errorf("%s: want two ports, got %q", file, b)
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", file, err)
	}
	lo, hi = max(start-span, floor), start
	if hi-lo < 1024 {
		return 0, 0, fmt.Errorf("the ephemeral range starts at %d, leaving too few ports below it", start)
	}
	return lo, hi, nil
}

// choose returns the first port of [lo, hi), from lo+offset on and around,
// that this process has not given and that isFree says is free; it marks
// it given. The caller holds mu.
func choose(lo, hi, offset int, isFree func(int) bool) (int, bool) {
	n := hi - lo
	for i := range n {
		p := lo + (offset+i)%n
		if !given[p] && isFree(p) {
			given[p] = true
			return p, true
		}
	}
	return 0, false
}

// claim reports whether port p is free and, where lock files can be kept,
// locks it for this process.
func claim(p int) bool {
	f, ok := lock(p)
	if !ok {
		return false // another test process has it
	}
	if !free(p) {
		if f != nil {
			f.Close()
		}
		return false
	}
	if f != nil {
		held = append(held, f)
	}
	return true
}

// lock takes port p's lock file without waiting. It returns false when
// another holder has it, and (nil, true) when no lock file can be kept
// here (then ports are only checked free, as before locks).
func lock(p int) (*os.File, bool) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, true
	}
	f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(p)), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, !errors.Is(err, syscall.EWOULDBLOCK)
	}
	return f, true
}

// free reports whether a listener can have port p on every address: what
// a server listening on all of them needs, and one on 127.0.0.1 too.
func free(p int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// kernelPort returns a port of the kernel's choosing that was free a
// moment ago.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on a loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
