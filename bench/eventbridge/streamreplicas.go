package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/contract/stream"
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
	var r1, r3, r3p *pipeline
	as(partKfn, func() { r1, err = kfnShaped(natsURL, sinkURL, o, nil, streamShape{replicas: 1}) })
	if err != nil {
		return err
	}
	defer r1.cleanup()
	r1.name = "kfn-r1"
	as(partKfn, func() { r3, err = kfnShaped(cluster.URL(), sinkURL, o, nil, streamShape{replicas: 3}) })
	if err != nil {
		return err
	}
	defer r3.cleanup()
	r3.name = "kfn-r3"
	pipelines := []*pipeline{r1, r3}
	var parted *natstest.Cluster
	if o.partitions > 1 {
		// On a cluster of its own: two event streams cannot take kyma.>
		// on one.
		var stop func()
		partedDir := filepath.Join(dir, "partitioned")
		if err := os.Mkdir(partedDir, 0o700); err != nil {
			return err
		}
		as(partNATS, func() { parted, stop, err = natstest.LaunchCluster(3, partedDir) })
		if err != nil {
			return fmt.Errorf("second 3-server NATS cluster: %w", err)
		}
		defer stop()
		as(partKfn, func() {
			r3p, err = kfnShaped(parted.URL(), sinkURL, o, nil, streamShape{replicas: 3, partitions: o.partitions})
		})
		if err != nil {
			return err
		}
		defer r3p.cleanup()
		r3p.name = fmt.Sprintf("kfn-r3-p%d", o.partitions)
		pipelines = append(pipelines, r3p)
	}
	for _, p := range pipelines {
		p.keys = partitionKeys // the events spread over the partitions
	}
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
	if r3p != nil {
		if err := partitionFigures(map[string]*natstest.Cluster{r3.name: cluster, r3p.name: parted}, r3, r3p, s, sinkURL, o, loads, timings); err != nil {
			return err
		}
	}
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

// partitionKeys is how many partition keys the events of -stream-replicas
// take in turn: enough to spread them over the partitions evenly.
const partitionKeys = 1000

// partitionFigures prints and records what partitions change on R3
// streams (r3p against r3, one partition, each on its cluster of 3
// servers in clusters): the throughputs and p99s of the rounds, and each
// server's share of the events stored while each pipeline ran a full load
// for o.duration by the streams it leads (a stream's leader takes its
// publishes, replicates them, and serves its consumers' pulls and
// acknowledgements): the busiest server's share is the leaders' spread,
// 1/3 at best.
func partitionFigures(clusters map[string]*natstest.Cluster, r3, r3p *pipeline, s *sink, sinkURL string, o options, loads map[string]load, timings map[string]timing) error {
	shares := map[string][]float64{} // %, by server
	for _, p := range []*pipeline{r3, r3p} {
		partitions := 1
		if p == r3p {
			partitions = o.partitions
		}
		streams := stream.Config{EventStream: stream.DefaultEventStream, Partitions: partitions}
		before, err := storedByLeader(clusters[p.name], streams)
		if err != nil {
			return err
		}
		if _, err := throughput(p, s, o, o.duration); err != nil {
			return err
		}
		after, err := storedByLeader(clusters[p.name], streams)
		if err != nil {
			return err
		}
		var total float64
		for _, srv := range clusters[p.name].Servers {
			total += float64(after[srv.Name()] - before[srv.Name()])
		}
		for _, srv := range clusters[p.name].Servers {
			shares[p.name] = append(shares[p.name], 100*float64(after[srv.Name()]-before[srv.Name()])/total)
		}
		fmt.Printf("%s: each server's share of the events stored by the streams it leads: %s\n", p.name, each(shares[p.name], "%.0f%%"))
	}
	l1, lp := loads[r3.name], loads[r3p.name]
	t1, tp := timings[r3.name], timings[r3p.name]
	fmt.Printf("\n%d partitions/1 partition, R3 on 3 servers: publish throughput %.2f, delivery throughput %.2f, publish p99 %.2f, delivery p99 %.2f; busiest leader %.0f%% against %.0f%%\n",
		o.partitions, lp.publishRate()/l1.publishRate(), lp.rate()/l1.rate(),
		ms(tp.publishPercentile(99))/ms(t1.publishPercentile(99)), ms(tp.percentile(99))/ms(t1.percentile(99)),
		slices.Max(shares[r3p.name]), slices.Max(shares[r3.name]))
	cpus, err := measureServerCPU(s, sinkURL, o, []int{1, o.partitions})
	if err != nil {
		return err
	}
	one, parted := cpus[0], cpus[1]
	fmt.Printf("busiest NATS server's CPU per event: %.1f µs with %d partitions, %.1f µs with one: on servers of their own, NATS carries %.2f times the events (a server of c cores: at most c x %.0f events/s against c x %.0f)\n",
		parted.busiest(), o.partitions, one.busiest(), one.busiest()/parted.busiest(), 1e6/parted.busiest(), 1e6/one.busiest())
	group := fmt.Sprintf("event bridge, %d partitions of R3 streams on 3 NATS servers", o.partitions)
	const anchor = "one partition of R3 streams on 3 servers, same run"
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: "busiest NATS server's CPU per event (3 NATS processes)", Unit: "µs",
			Value: parted.busiest(), Anchor: anchor, AnchorValue: one.busiest()},
		figures.Figure{Group: group, Name: fmt.Sprintf("publish throughput, %d B events, %d keys", o.size, partitionKeys), Unit: "events/s",
			Value: lp.publishRate(), Anchor: anchor, AnchorValue: l1.publishRate()},
		figures.Figure{Group: group, Name: fmt.Sprintf("delivery throughput, %d B events, %d keys", o.size, partitionKeys), Unit: "events/s",
			Value: lp.rate(), Anchor: anchor, AnchorValue: l1.rate()},
		figures.Figure{Group: group, Name: fmt.Sprintf("publish p99 at %d events/s", o.rate), Unit: "ms",
			Value: ms(tp.publishPercentile(99)), Anchor: anchor, AnchorValue: ms(t1.publishPercentile(99))},
		figures.Figure{Group: group, Name: fmt.Sprintf("delivery p99 at %d events/s", o.rate), Unit: "ms",
			Value: ms(tp.percentile(99)), Anchor: anchor, AnchorValue: ms(t1.percentile(99))},
		figures.Figure{Group: group, Name: "busiest server's share of the events stored, by the streams it leads", Unit: "%",
			Value: slices.Max(shares[r3p.name]), Anchor: anchor, AnchorValue: slices.Max(shares[r3.name])},
	)
}

// storedByLeader is, by server name, the last sequences of the partitions'
// streams each server leads: the events they stored so far.
func storedByLeader(c *natstest.Cluster, streams stream.Config) (map[string]uint64, error) {
	nc, err := nats.Connect(c.URL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	led := map[string]uint64{}
	for _, name := range streams.PartitionStreams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return nil, fmt.Errorf("stream %s has no leader", name)
		}
		led[info.Cluster.Leader] += info.State.LastSeq
	}
	return led, nil
}
