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
	fmt.Printf("url %s\n", ns.ClientURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startNATSProcess starts a NATS process (childNATS) and returns its
// client URL, and the stop that ends it and waits for it.
func startNATSProcess() (url string, stop func(), err error) {
	cmd, in, out, err := startSelf(nil, "-child-nats",
		"-cpuprofile", profiles.cpu, "-mutexprofile", profiles.mutex)
	if err != nil {
		return "", nil, fmt.Errorf("start the NATS process: %w", err)
	}
	stop = func() { _ = in.Close(); _ = cmd.Wait() }
	if !out.Scan() {
		_ = cmd.Process.Kill()
		return "", nil, fmt.Errorf("the NATS process did not start: %w", errors.Join(cmd.Wait(), out.Err()))
	}
	url, ok := strings.CutPrefix(out.Text(), "url ")
	if !ok {
		_ = cmd.Process.Kill()
		stop()
		return "", nil, fmt.Errorf("the NATS process said %q, not its URL", out.Text())
	}
	return url, stop, nil
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
