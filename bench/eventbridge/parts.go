package main

import (
	"context"
	"runtime/pprof"
)

// Profile labels: every goroutine of the benchmark carries the label
// "part" naming what it belongs to, inherited by the goroutines it starts,
// so that a CPU or allocation profile splits the one process into
// NATS, the two pipelines, the sink and the load generator:
//
//	go tool pprof -tags cpu.out            (the share of each part)
//	go tool pprof -tagfocus 'part=^kfn$' -top cpu.out
//
// With -observability, kfn with its metrics and traces is "observed" (its
// tracer's batch processor and the scrapes included) and its NATS server
// "observed-nats", beside "kfn" and "nats" without them.
const (
	partNATS = "nats"
	partBare = "bare"
	// partBareCE is the bare CloudEvents pipeline.
	partBareCE = "bare-ce"
	partKfn    = "kfn"
	// partObserved is kfn with its metrics and traces (-observability),
	// and partObservedNATS the NATS server it has to itself.
	partObserved     = "observed"
	partObservedNATS = "observed-nats"
	// partOrdered is kfn delivering in order per key (-ordered), and
	// partOrderedNATS the NATS server it has to itself.
	partOrdered     = "ordered"
	partOrderedNATS = "ordered-nats"
	partSink        = "sink"
	partLoad        = "load"
	partRaw         = "raw"
)

// as runs f with the profile label part=name on its goroutine and on the
// goroutines it starts (a server's connections, a client's read loops).
func as(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("part", name), func(context.Context) { f() })
}
