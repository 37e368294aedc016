package testport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A port from Port is below the ephemeral range, distinct from the others
// the process got, and a server can listen on it, on loopback or on every
// address.
func TestPortIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	lo, hi, err := candidates(rangeFile)
	if err != nil {
		t.Skipf("no ephemeral range to stay below on this machine: %v", err)
	}
	seen := map[int]bool{}
	for range 20 {
		p := Port(t)
		assert.GreaterOrEqual(t, p, lo)
		assert.Less(t, p, hi)
		assert.False(t, seen[p], "port %d given twice", p)
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
	host, port, err := net.SplitHostPort(Addr(t))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	assert.False(t, seen[p])
}

// A port some server already listens on is never returned.
func TestPortSkipsAListenedPort(t *testing.T) {
	lo, hi, err := candidates(rangeFile)
	if err != nil {
		t.Skipf("no ephemeral range to stay below on this machine: %v", err)
	}
	var taken net.Listener
	for p := lo; p < hi && taken == nil; p++ {
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			taken = l
		}
	}
	require.NotNil(t, taken, "no port to take")
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	assert.False(t, free(port), "a port a loopback server holds is not free on every address")
	mu.Lock()
	defer mu.Unlock()
	got, ok := choose(lo, hi, port-lo, free)
	require.True(t, ok)
	assert.NotEqual(t, port, got)
	delete(given, got)
}

// choose goes round from its offset, passing ports given before and ports
// that are not free.
func TestChooseGoesRoundPastGivenAndBusyPorts(t *testing.T) {
	mu.Lock()
	defer mu.Unlock()
	saved := given
	defer func() { given = saved }()
	given = map[int]bool{100: true}
	busy := map[int]bool{102: true}
	isFree := func(p int) bool { return !busy[p] }

	p, ok := choose(100, 103, 0, isFree)
	require.True(t, ok)
	assert.Equal(t, 101, p)
	p, ok = choose(100, 103, 2, isFree) // 102 busy, round to 100 (given), 101 (given)
	assert.False(t, ok, "got %d", p)
	busy = nil
	p, ok = choose(100, 103, 1, isFree)
	require.True(t, ok)
	assert.Equal(t, 102, p)
}

// The range file is read as the kernel writes it; anything else, or a
// range that leaves too few ports below it, is an error.
func TestCandidates(t *testing.T) {
	write := func(content string) string {
		f := filepath.Join(t.TempDir(), "range")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o644))
		return f
	}
	lo, hi, err := candidates(write("32768\t60999\n"))
	require.NoError(t, err)
	assert.Equal(t, 32768-span, lo)
	assert.Equal(t, 32768, hi)

	lo, hi, err = candidates(write("20000 30000\n"))
	require.NoError(t, err)
	assert.Equal(t, floor, lo, "never below the floor")
	assert.Equal(t, 20000, hi)

	for name, content := range map[string]string{
		"one field": "32768\n", "not a number": "low 60999\n", "empty": "", "no room below": "16500 60999\n",
	} {
		_, _, err := candidates(write(content))
		assert.Error(t, err, name)
	}
	_, _, err = candidates(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}

// A port whose lock file another holder has is not given: flock locks
// belong to an open file, so a second open in this process stands for
// another test process.
func TestPortLockedElsewhereIsNotGiven(t *testing.T) {
	lo, hi, err := candidates(rangeFile)
	if err != nil {
		t.Skipf("no ephemeral range to stay below on this machine: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var other *os.File
	var port int
	for p := lo; p < hi && other == nil; p++ {
		if given[p] {
			continue
		}
		if f, ok := lock(p); ok && f != nil {
			other, port = f, p
		}
	}
	require.NotNil(t, other, "no lock file could be taken under %s", lockDir)
	defer other.Close()
	assert.False(t, claim(port), "port %d is locked elsewhere", port)
	got, ok := choose(lo, hi, port-lo, claim)
	require.True(t, ok)
	assert.NotEqual(t, port, got)

	other.Close()
	f, ok := lock(port)
	require.True(t, ok, "free once the other holder closed it")
	require.NotNil(t, f)
	f.Close()
}
