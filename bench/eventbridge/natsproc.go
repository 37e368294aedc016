package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// childNATS is the NATS process of -nats-process: it starts a NATS server
// as startNATS does, says "url <client URL>" on stdout, and shuts it down
// when its stdin closes (the benchmark's turn ended). It writes the
// benchmark's -cpuprofile and -mutexprofile beside the benchmark's, with
// the suffix ".nats<pid>": where the server spends, and which of its locks
// a tenant's work holds (the interest checks of acknowledgements, for one).
func childNATS() error {
	ns, stop, err := startNATS()
	if err != nil {
		return err
	}
	defer stop()
	serveUntilStdinCloses(ns.ClientURL())
	return nil
}

// serveUntilStdinCloses says "url <url>" on stdout, for startServerProcess,
// and returns when stdin closes (the benchmark is done with the server).
func serveUntilStdinCloses(url string) {
	fmt.Printf("url %s\n", url)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startNATSProcess starts a NATS process (childNATS) and returns its
// client URL, and the stop that ends it and waits for it.
func startNATSProcess() (url string, stop func(), err error) {
	url, _, stop, err = startServerProcess("-child-nats", "-cpuprofile", profiles.cpu, "-mutexprofile", profiles.mutex)
	return url, stop, err
}

// startServerProcess starts this program with args as a server process
// that says its URL (serveUntilStdinCloses), and returns the URL, its pid,
// and the stop that ends it and waits for it.
func startServerProcess(args ...string) (url string, pid int, stop func(), err error) {
	cmd, in, out, err := startSelf(nil, args...)
	if err != nil {
		return "", 0, nil, fmt.Errorf("start the process %s: %w", args[0], err)
	}
	stop = func() { _ = in.Close(); _ = cmd.Wait() }
	if !out.Scan() {
		_ = cmd.Process.Kill()
		return "", 0, nil, fmt.Errorf("the process %s did not start: %w", args[0], errors.Join(cmd.Wait(), out.Err()))
	}
	url, ok := strings.CutPrefix(out.Text(), "url ")
	if !ok {
		_ = cmd.Process.Kill()
		stop()
		return "", 0, nil, fmt.Errorf("the process %s said %q, not its URL", args[0], out.Text())
	}
	return url, cmd.Process.Pid, stop, nil
}

// hostileNATS starts the NATS server of a -hostile turn: in its own
// process with -nats-process (as in a cluster, where NATS is a pod of its
// own), else in the benchmark's.
func hostileNATS(o options) (url string, stop func(), err error) {
	if o.natsProcess {
		return startNATSProcess()
	}
	ns, stop, err := startNATS()
	if err != nil {
		return "", nil, err
	}
	return ns.ClientURL(), stop, nil
}
