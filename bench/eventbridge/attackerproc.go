package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The attacker of -hostile runs in a process of its own, at the lowest CPU
// priority (nice 19): its clients and sinks stand for a tenant's pods, which
// run on CPUs of their own in a cluster. On this machine's two cores, in the
// benchmark's process, the attacker's own work (building 2 MiB requests,
// answering 1,500 deliveries/s) took as much CPU as kfn's handling of it and
// was measured as if kfn had spent it. What the ratios show now is what kfn's
// shared parts (the publisher, the dispatcher, NATS) let the attack cost the
// victim. The process reports what it achieved (requests sent, deliveries
// its sinks answered), so that an attacker starved of CPU shows as such.
//
// The protocol, a line each on the child's stdin and stdout:
//
//	child:  sinks {"service": "http://127.0.0.1:port", ...}
//	parent: attack http://publisher-base <the attacker namespace's token>
//	parent: (closes stdin)
//	child:  done {"sent": n, "answered": n, "refusedOK": n, "wrong": n, "firstWrong": "..."}

// attackerReport is what an attacker process did, told at its end.
type attackerReport struct {
	Sent       int64  `json:"sent"`
	Answered   int64  `json:"answered"`
	RefusedOK  int64  `json:"refusedOK"`
	Wrong      int64  `json:"wrong"`
	FirstWrong string `json:"firstWrong,omitempty"`
}

// childAttacker is the attacker process of the attack class named class
// (see the protocol above).
func childAttacker(class, victimSink string) error {
	i := slices.IndexFunc(attackClasses, func(c attackClass) bool { return c.name == class })
	if i < 0 {
		return fmt.Errorf("child attacker: no attack class %q", class)
	}
	a := newAttacker(victimSink)
	attackClasses[i].arm(a)
	var answered atomic.Int64
	urls := map[string]string{}
	var servers []*http.Server
	for name, h := range a.sinks {
		srv, url, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answered.Add(1); h(w, r) }))
		if err != nil {
			return err
		}
		servers = append(servers, srv)
		urls[name] = url
	}
	line, err := json.Marshal(urls)
	if err != nil {
		return err
	}
	fmt.Printf("sinks %s\n", line)
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return fmt.Errorf("child attacker: no publisher: %w", in.Err())
	}
	args, ok := strings.CutPrefix(in.Text(), "attack ")
	base, token, _ := strings.Cut(args, " ")
	if !ok {
		return fmt.Errorf("child attacker: unknown request %q", in.Text())
	}
	a.token = token
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent atomic.Int64
	a.attack(ctx, &wg, base, &sent)
	for in.Scan() { // until stdin closes
	}
	cancel()
	close(a.done) // the sinks that never answer end
	wg.Wait()
	for _, s := range servers {
		_ = s.Close()
	}
	r := attackerReport{Sent: sent.Load(), Answered: answered.Load(), RefusedOK: a.refusedOK.Load(), Wrong: a.wrong.Load()}
	if err, ok := a.firstWrong.Load().(error); ok {
		r.FirstWrong = err.Error()
	}
	line, err = json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Printf("done %s\n", line)
	return nil
}

// attackerProc is a running attacker process, started by startAttacker.
type attackerProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	sinks map[string]string // service -> URL
}

// startAttacker starts the attacker process of class c at nice 19 and
// reads where its sinks listen.
func startAttacker(c *attackClass, victimSink string) (*attackerProc, error) {
	cmd, in, out, err := startSelf([]string{"nice", "-n", "19"}, "-child-attacker", c.name, "-child-sink", victimSink)
	if err != nil {
		return nil, fmt.Errorf("start the attacker process: %w", err)
	}
	p := &attackerProc{cmd: cmd, in: in, out: out}
	if !p.out.Scan() {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("the attacker process did not start: %w", errors.Join(cmd.Wait(), p.out.Err()))
	}
	line, ok := strings.CutPrefix(p.out.Text(), "sinks ")
	if !ok || json.Unmarshal([]byte(line), &p.sinks) != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("the attacker process said %q, not its sinks", p.out.Text())
	}
	return p, nil
}

// attack has the process start its loads on the publisher at base, its
// publishes carrying token.
func (p *attackerProc) attack(base, token string) error {
	_, err := fmt.Fprintf(p.in, "attack %s %s\n", base, token)
	return err
}

// stop ends the attack and returns the process's report; it waits at most
// 30 s.
func (p *attackerProc) stop() (attackerReport, error) {
	_ = p.in.Close()
	var r attackerReport
	read := make(chan error, 1)
	go func() {
		if !p.out.Scan() {
			read <- fmt.Errorf("the attacker process ended without its report: %w", p.out.Err())
			return
		}
		line, ok := strings.CutPrefix(p.out.Text(), "done ")
		if !ok {
			read <- fmt.Errorf("the attacker process said %q, not its report", p.out.Text())
			return
		}
		read <- json.Unmarshal([]byte(line), &r)
	}()
	var err error
	select {
	case err = <-read:
	case <-time.After(30 * time.Second):
		err = errors.New("the attacker process did not report within 30 s")
	}
	if err != nil {
		_ = p.cmd.Process.Kill()
	}
	return r, errors.Join(err, p.cmd.Wait())
}
