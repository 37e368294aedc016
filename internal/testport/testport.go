package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
)

// Port returns a TCP port that is free on every address (a server may
// listen on 127.0.0.1 or on all of them) and lies below the kernel's
// ephemeral range, so that no listener on port 0 and no outgoing
// connection takes it before the test's server listens on it, or between
// two runs of a server restarted on it. A process never gets the same port
// twice. Where the range cannot be read or leaves no room below it, Port
// falls back to a port of the kernel's choosing, as net.Listen on port 0
// does, and the test is told so.
func Port(t testing.TB) int {
	t.Helper()
	lo, hi, err := candidates(rangeFile)
	mu.Lock()
	defer mu.Unlock()
	if err == nil {
		if p, ok := choose(lo, hi, rand.IntN(hi-lo), free); ok {
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
