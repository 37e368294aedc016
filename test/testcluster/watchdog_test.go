package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
	victim, exited := startVictim(t, dir)
	require.NoError(t, wd.removeOnKill(other))

	// What the kernel does when the test binary dies: its end of the pipe
	// is closed without a word.
	require.NoError(t, wd.pipe.Close())

	// The bound is generous: on a loaded machine the scan of /proc can wait
	// for busy processes. A failure says what the watchdog was doing.
	const bound = 30 * time.Second
	if !assert.Eventually(t, closed(exited), bound, 10*time.Millisecond, "victim still running") {
		t.Fatalf("watchdog and its children:\n%svictim:\n%s", describeTree(wd.cmd.Process.Pid), describeTree(victim.Process.Pid))
	}
	require.Eventually(t, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}, bound, 10*time.Millisecond, "cluster directory not removed")
	require.Eventually(t, func() bool {
		_, err := os.Stat(other)
		return os.IsNotExist(err)
	}, bound, 10*time.Millisecond, "path given to removeOnKill not removed")
	require.NoError(t, wd.cmd.Wait())
}

// describeTree lists root and its descendants, one per line, with their
// state, what the kernel has them waiting in and their command line: what a
// watchdog that did not act was doing.
func describeTree(root int) string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := statFields(string(data))
		if len(fields) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
	}
	var b strings.Builder
	var walk func(pid, depth int)
	walk = func(pid, depth int) {
		proc := fmt.Sprintf("/proc/%d/", pid)
		stat, err := os.ReadFile(proc + "stat")
		if err != nil {
			fmt.Fprintf(&b, "%s%d: gone\n", strings.Repeat("  ", depth), pid)
			return
		}
		state := "?"
		if fields := statFields(string(stat)); len(fields) > 0 {
			state = fields[0]
		}
		wchan, _ := os.ReadFile(proc + "wchan")
		cmdline, _ := os.ReadFile(proc + "cmdline")
		if len(cmdline) > 100 {
			cmdline = append(cmdline[:100], "..."...)
		}
		fmt.Fprintf(&b, "%s%d state=%s wchan=%s %q\n", strings.Repeat("  ", depth), pid, state, wchan,
			strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
		for _, c := range children[pid] {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return b.String()
}

// statFields returns the fields of /proc/PID/stat after the command name,
// which may itself hold spaces and parentheses: state first, then ppid.
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
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
