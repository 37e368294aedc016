package main

import (
	"fmt"
	"strconv"

	"github.com/kfn-dev/kfn/bench/figures"
)

// ordered measures kfn delivering the events of each of o.keys partition
// keys in order (spec.config ordering: partitionkey) against kfn
// delivering the same events, keys and all, unordered, as observability
// measures its variants: both built once, each on a NATS server of its
// own, warmed up, and measured in turns of o.slice, the order rotating,
// o.rounds times. The load generator gives each event one of the keys in
// turn (ce-partitionkey), so that every key has events waiting while
// others are delivered: what ordering costs is its bookkeeping and the
// events held behind their keys, not a serialised stream.
func ordered(natsURL string, s *sink, sinkURL string, o options) error {
	if o.keys < 1 {
		return fmt.Errorf("-ordered %d: want at least one key", o.keys)
	}
	orderedNATS, stopNATS, err := startNATSAs(partOrderedNATS)
	if err != nil {
		return err
	}
	defer stopNATS()
	var unordered, inOrder *pipeline
	as(partKfn, func() { unordered, err = kfn(natsURL, sinkURL, o, nil) })
	if err != nil {
		return err
	}
	defer unordered.cleanup()
	keyed := o
	keyed.ordering = true
	as(partOrdered, func() { inOrder, err = kfn(orderedNATS.ClientURL(), sinkURL, keyed, nil) })
	if err != nil {
		return err
	}
	defer inOrder.cleanup()
	inOrder.name = "ordered"
	unordered.keys, inOrder.keys = o.keys, o.keys
	loads, timings, err := alternate(unordered, inOrder, s, o, func(round int, order []*pipeline, roundLoads map[string]load, roundTimings map[string]timing) {
		for _, p := range order {
			l, t := roundLoads[p.name], roundTimings[p.name]
			fmt.Printf("round %d  %-9s throughput %8.0f events/s  CPU %5.1f µs/event   latency at %d/s: p99 %6.2f ms  (undelivered %d)\n",
				round, p.name, l.rate(), l.cpuPerEvent(), o.rate, ms(t.percentile(99)), t.lost)
		}
	})
	if err != nil {
		return err
	}
	without, with := loads[unordered.name], loads[inOrder.name]
	p99Without, p99With := ms(timings[unordered.name].percentile(99)), ms(timings[inOrder.name].percentile(99))
	fmt.Printf("\nordered/unordered with %d keys, %d in flight: throughput %.3f (%.0f against %.0f events/s), p99 at %d/s %.2f against %.2f ms, CPU per event %.3f\n",
		o.keys, o.inflight, with.rate()/without.rate(), with.rate(), without.rate(), o.rate, p99With, p99Without, with.cpuPerEvent()/without.cpuPerEvent())
	const group = "event bridge"
	keys := strconv.Itoa(o.keys)
	if o.keys == 1000 {
		keys = "1,000"
	}
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("throughput in order per key, %s keys, %d B events", keys, o.size), Unit: "events/s", Value: with.rate(),
			Anchor: "the same events unordered", AnchorValue: without.rate()},
		figures.Figure{Group: group, Name: fmt.Sprintf("p99 latency at %d events/s in order per key, %s keys", o.rate, keys), Unit: "ms", Value: p99With,
			Anchor: "the same events unordered", AnchorValue: p99Without},
	)
}
