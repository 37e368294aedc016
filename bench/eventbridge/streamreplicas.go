package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/test/natstest"
)

// streamReplicas measures what the chart's profile ha costs the event
// path: kfn with R3 streams (events, dead letters, the lock bucket) on a
// cluster of 3 NATS servers against kfn with R1 streams on one server
// (natsURL's), as profile small runs it. An R3 publish is acknowledged
// once two of the three servers stored it, and a delivery's
// acknowledgement is replicated too. All servers run in this process on
// the same cores, as the load generator, the pipelines and the sink do:
// on a machine of more cores, or servers on their own nodes, R3 would
// cost less of the machine and more of the network. Both pipelines are
// built once, warmed up and measured in turns (measureInTurns), o.rounds
// times. The figures are publish throughput (events acknowledged per
// second at full load) and delivery throughput (until the last was
// delivered), the publish p99 (request to acknowledgement) and the
// delivery p99 (publish to delivery) at o.rate; the R1 pipeline is each
// figure's anchor.
func streamReplicas(natsURL string, s *sink, sinkURL string, o options) error {
	dir, err := os.MkdirTemp("", "kfn-bench-r3-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var cluster *natstest.Cluster
	var stopCluster func()
	as(partNATS, func() { cluster, stopCluster, err = natstest.LaunchCluster(3, dir) })
	if err != nil {
		return fmt.Errorf("3-server NATS cluster: %w", err)
	}
	defer stopCluster()
	var r1, r3 *pipeline
	as(partKfn, func() { r1, err = kfnReplicated(natsURL, sinkURL, o, nil, 1) })
	if err != nil {
		return err
	}
	defer r1.cleanup()
	r1.name = "kfn-r1"
	as(partKfn, func() { r3, err = kfnReplicated(cluster.URL(), sinkURL, o, nil, 3) })
	if err != nil {
		return err
	}
	defer r3.cleanup()
	r3.name = "kfn-r3"
	pipelines := []*pipeline{r1, r3}
	for _, p := range pipelines {
		if _, err := throughput(p, s, o, o.slice); err != nil { // warm up
			return err
		}
	}
	loads, timings := map[string]load{}, map[string]timing{}
	for round := 1; round <= o.rounds; round++ {
		order := append(slices.Clone(pipelines[round%2:]), pipelines[:round%2]...)
		roundLoads, roundTimings, err := measureInTurns(order, s, o)
		if err != nil {
			return err
		}
		for _, p := range pipelines {
			l, t := roundLoads[p.name], roundTimings[p.name]
			fmt.Printf("round %d  %s  publish %8.0f events/s  delivery %8.0f events/s   at %d/s: publish p99 %6.2f ms  delivery p99 %6.2f ms  (undelivered %d)\n",
				round, p.name, l.publishRate(), l.rate(), o.rate, ms(t.publishPercentile(99)), ms(t.percentile(99)), t.lost)
			loads[p.name] = loads[p.name].add(l)
			timings[p.name] = timings[p.name].add(t)
		}
	}
	l1, l3 := loads[r1.name], loads[r3.name]
	t1, t3 := timings[r1.name], timings[r3.name]
	fmt.Printf("\nall rounds: R3/R1 publish throughput %.2f, delivery throughput %.2f, publish p99 %.2f, delivery p99 %.2f\n",
		l3.publishRate()/l1.publishRate(), l3.rate()/l1.rate(), ms(t3.publishPercentile(99))/ms(t1.publishPercentile(99)), ms(t3.percentile(99))/ms(t1.percentile(99)))
	const group = "event bridge, R3 streams on 3 NATS servers (profile ha)"
	anchor := "R1 streams on one NATS server (profile small), same run"
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("publish throughput, %d B events", o.size), Unit: "events/s",
			Value: l3.publishRate(), Anchor: anchor, AnchorValue: l1.publishRate()},
		figures.Figure{Group: group, Name: fmt.Sprintf("delivery throughput, %d B events", o.size), Unit: "events/s",
			Value: l3.rate(), Anchor: anchor, AnchorValue: l1.rate()},
		figures.Figure{Group: group, Name: fmt.Sprintf("publish p99 at %d events/s", o.rate), Unit: "ms",
			Value: ms(t3.publishPercentile(99)), Anchor: anchor, AnchorValue: ms(t1.publishPercentile(99))},
		figures.Figure{Group: group, Name: fmt.Sprintf("delivery p99 at %d events/s", o.rate), Unit: "ms",
			Value: ms(t3.percentile(99)), Anchor: anchor, AnchorValue: ms(t1.percentile(99))},
	)
}
