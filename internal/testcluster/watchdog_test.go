package testcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startVictim starts a long-running process whose command line mentions a
// file in dir, as etcd's --data-dir does, and returns a channel closed when
// it exits.
func startVictim(t *testing.T, dir string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	file := filepath.Join(dir, "log")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	victim := exec.Command("tail", "-f", file)
	require.NoError(t, victim.Start())
	exited := make(chan struct{})
	go func() {
		_ = victim.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = victim.Process.Kill()
		<-exited
	})
	return victim, exited
}

func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

func TestWatchdogKillsWhenTheTestProcessGoesAway(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the watchdog finds processes through /proc")
	}
	dir, err := os.MkdirTemp("", "kfn-watchdog-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	other, err := os.MkdirTemp("", "kfn-watchdog-test-other-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(other) })

	wd, err := startWatchdog(dir)
	require.NoError(t, err)
	_, exited := startVictim(t, dir)
	require.NoError(t, wd.removeOnKill(other))

	// What the kernel does when the test binary dies: its end of the pipe
	// is closed without a word.
	require.NoError(t, wd.pipe.Close())

	require.Eventually(t, closed(exited), 10*time.Second, 10*time.Millisecond, "victim still running")
	require.Eventually(t, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "cluster directory not removed")
	require.Eventually(t, func() bool {
		_, err := os.Stat(other)
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "path given to removeOnKill not removed")
	require.NoError(t, wd.cmd.Wait())
}

func TestWatchdogDismissedLeavesProcessesAlone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the watchdog finds processes through /proc")
	}
	dir := t.TempDir()
	wd, err := startWatchdog(dir)
	require.NoError(t, err)
	_, exited := startVictim(t, dir)
	other := t.TempDir()
	require.NoError(t, wd.removeOnKill(other))

	require.NoError(t, wd.dismiss())
	require.False(t, closed(exited)(), "victim killed by a dismissed watchdog")
	require.DirExists(t, dir)
	require.DirExists(t, other)
}
