package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// measurePeer measures a Node.js server someone started by hand (peer is
// NAME=HOST:PORT, a server answering GET / with 200) beside plain node:http
// and the kfn host, with the same load generator: throughput rounds with
// the three servers in rotating order, then latency at the fixed rate in
// turns. It only prints: a peer is not part of the committed figures.
func measurePeer(ctx context.Context, c config, pairs []pair, out io.Writer) error {
	name, addr, ok := strings.Cut(c.peer, "=")
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("-peer %q: want NAME=HOST:PORT", c.peer)
	}
	var p *pair
	for i := range pairs {
		if pairs[i].language == "nodejs" {
			p = &pairs[i]
		}
	}
	if p == nil {
		return fmt.Errorf("-peer needs the Node.js servers (not -only python)")
	}
	if code, err := probe(addr, "/"); err != nil {
		return fmt.Errorf("-peer %s: %w", addr, err)
	} else if code != 200 {
		return fmt.Errorf("-peer %s: GET / answered %d, want 200", addr, code)
	}
	plain, _, err := start(p.anchor, 20*time.Second)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.anchor.name, err)
	}
	defer plain.stop()
	host, _, err := start(p.kfn, 20*time.Second)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.kfn.name, err)
	}
	defer host.stop()
	names := []string{p.anchor.name, p.kfn.name, name}
	addrs := []string{plain.addr, host.addr, addr}
	for i, a := range addrs {
		if _, err := throughput(a, c.conns, c.warmup); err != nil {
			return fmt.Errorf("warm up %s: %w", names[i], err)
		}
	}
	rps := make([][]float64, len(addrs))
	for round := range c.rounds {
		for k := range addrs {
			i := (k + round) % len(addrs)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r, err := throughput(addrs[i], c.conns, c.duration)
			if err != nil {
				return fmt.Errorf("throughput of %s: %w", names[i], err)
			}
			fmt.Fprintf(os.Stderr, "  round %d  %-28s %9.0f req/s\n", round+1, names[i], r)
			rps[i] = append(rps[i], r)
		}
	}
	ls, err := latencies(addrs, c.rate, c.latency)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	fmt.Fprintf(out, "\npeer %s beside plain node:http and the kfn host (%s; %d rounds of %s, %d connections, order rotating; latency at %.0f req/s for %s, in turns)\n",
		name, addr, c.rounds, c.duration, c.conns, c.rate, c.latency)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "server\treq/s (median)\tvs plain\tp50\tp99\tmax\t")
	for i := range addrs {
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%s\t%s\t%s\t\n", names[i], medianFloat(rps[i]), pairedRatio(rps[i], rps[0]),
			ms(percentile(ls[i], 50)), ms(percentile(ls[i], 99)), ms(percentile(ls[i], 100)))
	}
	return w.Flush()
}
