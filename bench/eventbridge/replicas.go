package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/bench/procstat"
	"github.com/kfn-dev/kfn/eventbridge"
)

// This file runs dispatchers as processes of their own, as replicas run in
// a cluster: the benchmark starts itself again with -child-dispatcher,
// and talks to the child over its standard input and output. That is how
// it measures two replicas beside one (-replicas 2) and what a dispatcher
// costs with idle Subscriptions (-idle).

// childDispatcher serves the first c.serve Subscriptions of o
// (subscriptions) from the NATS server at c.nats, delivering to c.sink,
// until its standard input ends. It prints "ready" once started, and answers each line "stats" on
// its input with "stats <CPU ns> <RSS KiB>": the CPU time it used so far
// and its resident memory.
func childDispatcher(c childFlags, o options) error {
	rb, err := startBridge(c.nats, []string{eventbridge.ComponentDispatcher}, to(c.sink), subscriptions(o)[:c.serve], nil, streamShape{})
	if err != nil {
		return err
	}
	defer rb.stop()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "stats" {
			return fmt.Errorf("child dispatcher: unknown request %q", in.Text())
		}
		_, rss, err := procstat.Memory(os.Getpid())
		if err != nil {
			return err
		}
		fmt.Printf("stats %d %d\n", cpuTime(), rss)
	}
	return in.Err()
}

// child is a dispatcher process started by startChild.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	done chan error
}

// startChild starts a dispatcher process for the first serve
// Subscriptions of o and waits until it serves them.
func startChild(natsURL, sinkURL string, o options, serve int) (*child, error) {
	cmd, in, out, err := startSelf(nil, "-child-dispatcher", natsURL, "-child-sink", sinkURL, "-child-serve", strconv.Itoa(serve),
		"-subscriptions", strconv.Itoa(o.subs), "-inflight", strconv.Itoa(o.inflight),
		"-cpuprofile", profiles.cpu, "-memprofile", profiles.mem, "-mutexprofile", profiles.mutex)
	if err != nil {
		return nil, fmt.Errorf("start a dispatcher process: %w", err)
	}
	c := &child{cmd: cmd, in: in, out: out, done: make(chan error, 1)}
	if !c.out.Scan() || c.out.Text() != "ready" {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("dispatcher process did not start: %w", errors.Join(cmd.Wait(), c.out.Err()))
	}
	go func() { c.done <- cmd.Wait() }()
	return c, nil
}

// startSelf starts this program again with args (run by the command
// before, such as nice, when given), its stdin and stdout piped, its
// stderr the benchmark's; it dies with the benchmark.
func startSelf(before []string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	argv := append(append(slices.Clone(before), self), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the benchmark
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	scan := bufio.NewScanner(out)
	scan.Buffer(nil, 1<<20)
	return cmd, in, scan, nil
}

// stats returns the CPU time the child used so far and its resident
// memory in KiB.
func (c *child) stats() (time.Duration, int64, error) {
	if _, err := io.WriteString(c.in, "stats\n"); err != nil {
		return 0, 0, err
	}
	if !c.out.Scan() {
		return 0, 0, fmt.Errorf("dispatcher process answered nothing: %w", c.out.Err())
	}
	var cpu, rss int64
	if _, err := fmt.Sscanf(c.out.Text(), "stats %d %d", &cpu, &rss); err != nil {
		return 0, 0, fmt.Errorf("dispatcher process answered %q: %w", c.out.Text(), err)
	}
	return time.Duration(cpu), rss, nil
}

// stop ends the child as a scale-down does: it stops pulling, finishes the
// deliveries in progress and exits.
func (c *child) stop() error {
	c.in.Close()
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		return errors.New("dispatcher process did not stop within 30s")
	}
}

// replicas measures the throughput of kfn with two dispatcher processes
// serving every Subscription beside one, in alternating order, the
// publisher in this process: whether a second replica shares the work or
// gets in the way. On a machine of few cores the second replica has no
// core of its own, so the figure that matters is that it costs nothing.
func replicas(natsURL string, s *sink, sinkURL string, o options) error {
	var p *pipeline
	var err error
	as(partKfn, func() {
		var rb *runningBridge
		if rb, err = startBridge(natsURL, []string{eventbridge.ComponentPublisher}, nil, subscriptions(o), nil, streamShape{}); err == nil {
			p, err = publish(rb, o, rb.stop)
		}
	})
	if err != nil {
		return err
	}
	defer p.cleanup()
	all := len(subscriptions(o))
	first, err := startChild(natsURL, sinkURL, o, all)
	if err != nil {
		return err
	}
	defer first.stop()
	if _, err := throughput(p, s, o, time.Second); err != nil { // warm up
		return err
	}
	tps := map[int][]float64{}
	for round := 1; round <= o.rounds; round++ {
		order := []int{1, 2}
		if round%2 == 0 {
			order = []int{2, 1}
		}
		for _, n := range order {
			var second *child
			if n == 2 {
				if second, err = startChild(natsURL, sinkURL, o, all); err != nil {
					return err
				}
			}
			tp, err := throughput(p, s, o, o.duration)
			if second != nil {
				err = errors.Join(err, second.stop())
			}
			if err != nil {
				return err
			}
			fmt.Printf("round %d  kfn, %d dispatcher process(es)  throughput %8.0f events/s\n", round, n, tp)
			tps[n] = append(tps[n], tp)
		}
	}
	one, two := median(tps[1]), median(tps[2])
	fmt.Printf("\nmedian of %d rounds: 1 replica %.0f events/s, 2 replicas %.0f events/s (ratio %.2f)\n", o.rounds, one, two, two/one)
	suffix := ""
	if o.subs > 1 {
		suffix = fmt.Sprintf(", %d Subscriptions", o.subs)
	}
	return figures.Append(o.figures, figures.Figure{Group: "event bridge",
		Name: fmt.Sprintf("throughput with 2 dispatcher replicas (processes), %d B events%s", o.size, suffix), Unit: "events/s",
		Value: two, Anchor: "1 dispatcher replica (process), same run", AnchorValue: one})
}

// idle measures what a dispatcher process serving o.subs Subscriptions
// costs while no event arrives: its CPU over o.duration (pull requests
// renewed, heartbeats, timers) and its resident memory, beside the same
// process serving none; and the CPU NATS (this process) spends on them.
func idle(natsURL, sinkURL string, o options) error {
	if o.subs < 1 {
		return errors.New("-idle needs -subscriptions of at least 1")
	}
	// The consumers, made as the reconciler makes them, by a publisher.
	rb, err := startBridge(natsURL, []string{eventbridge.ComponentPublisher}, nil, subscriptions(o), nil, streamShape{})
	if err != nil {
		return err
	}
	defer rb.stop()
	type cost struct {
		cpu, natsCPU float64 // cores
		rss          float64 // MiB
	}
	measure := func(serve int) (cost, error) {
		c, err := startChild(natsURL, sinkURL, o, serve)
		if err != nil {
			return cost{}, err
		}
		defer c.stop()
		time.Sleep(2 * time.Second) // every pull request issued once
		cpu0, _, err := c.stats()
		if err != nil {
			return cost{}, err
		}
		nats0, t0 := cpuTime(), time.Now()
		time.Sleep(o.duration)
		cpu1, rss, err := c.stats()
		if err != nil {
			return cost{}, err
		}
		took := time.Since(t0).Seconds()
		return cost{cpu: (cpu1 - cpu0).Seconds() / took, natsCPU: (cpuTime() - nats0).Seconds() / took, rss: float64(rss) / 1024}, nil
	}
	empty, err := measure(0)
	if err != nil {
		return err
	}
	n := o.subs
	busy, err := measure(n)
	if err != nil {
		return err
	}
	fmt.Printf("idle dispatcher process over %s: %d Subscriptions: CPU %.2f%% of a core, RSS %.1f MiB, NATS CPU %.2f%% of a core;"+
		" no Subscription: CPU %.2f%%, RSS %.1f MiB, NATS CPU %.2f%%\n",
		o.duration, n, 100*busy.cpu, busy.rss, 100*busy.natsCPU, 100*empty.cpu, empty.rss, 100*empty.natsCPU)
	what := fmt.Sprintf("%d idle Subscriptions", n)
	anchor := "the same dispatcher process serving none"
	return figures.Append(o.figures,
		figures.Figure{Group: "event bridge", Name: "dispatcher CPU with " + what, Unit: "% of a core",
			Value: 100 * busy.cpu, Anchor: anchor, AnchorValue: 100 * empty.cpu},
		figures.Figure{Group: "event bridge", Name: "dispatcher RSS with " + what, Unit: "MiB",
			Value: busy.rss, Anchor: anchor, AnchorValue: empty.rss},
		figures.Figure{Group: "event bridge", Name: "NATS CPU for the dispatcher's " + what, Unit: "% of a core",
			Value: 100 * busy.natsCPU, Anchor: anchor, AnchorValue: 100 * empty.natsCPU},
	)
}

// childFlags are the flags only a child dispatcher process gets: the NATS
// server, the sink, and how many of the Subscriptions to serve.
type childFlags struct {
	nats, sink string
	serve      int
	// attacker is the attack class of an attacker process (-hostile).
	attacker string
	// natsServer makes the process the NATS server of -nats-process.
	natsServer bool
	// natsMember makes the process a server of a cluster of processes
	// (childNATSMember).
	natsMember string
	bare       string
	// apart makes the process an attacker's event bridge of -apart
	// (childApart).
	apart string
}
