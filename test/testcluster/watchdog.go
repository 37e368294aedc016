package testcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// watchdogScript reads commands on stdin, one per line:
//
//	remove PATH  also remove PATH when killing
//	stop         the cluster was stopped cleanly: exit
//	kill         kill and remove now
//
// End of file counts as kill: the test process died, and the kernel closed
// its end of the pipe however it died. Killing means SIGKILL to every process
// whose command line mentions the cluster's directory, then removing it and
// the other paths. etcd's --data-dir and kube-apiserver's --cert-dir are in
// that directory, so this finds them even after they were reparented, and
// never touches anything else. grep reads the pattern from stdin so that its
// own command line does not match, and writes each match as it finds it, so
// that a process is killed as soon as it is found rather than after the whole
// scan (reading a busy process's command line waits for its memory map's
// lock). SIGINT and SIGHUP are ignored so that a Ctrl-C that kills the test
// binary leaves the watchdog to do its work.
const watchdogScript = `trap '' INT HUP
remove=$KFN_TESTCLUSTER_DIR
while read -r cmd arg; do
	case $cmd in
	stop) exit 0 ;;
	remove) remove="$remove
$arg" ;;
	*) break ;;
	esac
done
printf '%s\n' "$KFN_TESTCLUSTER_DIR" |
	grep --line-buffered -lsF -f - /proc/[0-9]*/cmdline |
	while read -r f; do
		pid=${f#/proc/}
		kill -KILL "${pid%/cmdline}" 2>/dev/null
	done
printf '%s\n' "$remove" | while IFS= read -r path; do rm -rf "$path"; done
`

// watchdog is a shell process that outlives the test binary just long enough
// to kill the control plane that the test binary started.
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // write end; the watchdog acts when it gets a line or EOF
}

// startWatchdog starts a watchdog for the processes whose command lines
// mention dir.
func startWatchdog(dir string) (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: etcd and kube-apiserver never hold w
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript)
	cmd.Env = append(os.Environ(), "KFN_TESTCLUSTER_DIR="+dir)
	cmd.Stdin = r
	cmd.Stdout = io.Discard
	cmd.Stderr = io.Discard
	// Its own process group: a signal to the test's group must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	_ = r.Close() // the child has its copy
	return &watchdog{cmd: cmd, pipe: w}, nil
}

// removeOnKill adds path to what the watchdog removes if it has to kill,
// for temporary files that envtest makes outside the cluster's directory.
func (d *watchdog) removeOnKill(path string) error {
	if strings.Contains(path, "\n") {
		return fmt.Errorf("watchdog: path with a line break: %q", path)
	}
	if _, err := io.WriteString(d.pipe, "remove "+path+"\n"); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	return nil
}

// dismiss tells the watchdog that the processes ended cleanly and waits for
// it to exit.
func (d *watchdog) dismiss() error {
	return d.send("stop\n")
}

// kill makes the watchdog kill the processes and remove their directory now,
// and waits until it has done so.
func (d *watchdog) kill() error {
	return d.send("kill\n")
}

func (d *watchdog) send(line string) error {
	_, werr := io.WriteString(d.pipe, line)
	cerr := d.pipe.Close()
	waitErr := d.cmd.Wait()
	if err := errors.Join(werr, cerr, waitErr); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	return nil
}
