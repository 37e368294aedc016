package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
)

// telemetry is what the event bridge records in a cluster, pointed at
// in-process sinks: a Prometheus registry scraped every second, and a
// tracer provider sampling every span, batching them to an exporter that
// discards them.
type telemetry struct {
	reg      *prometheus.Registry
	traces   otlp.Provider
	exported *discard
	// paths: the event bridge records each namespace's events' paths, as
	// with the admin API in a cluster (eventbridge.Config.EventPaths).
	paths bool
}

// discard is a span exporter that drops every span (counting them).
type discard struct{ spans atomic.Int64 }

func (d *discard) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	d.spans.Add(int64(len(spans)))
	return nil
}

// count is the spans exported so far.
func (d *discard) count() int64 { return d.spans.Load() }

func (*discard) Shutdown(context.Context) error { return nil }

// newTelemetry records what: "both", "metrics", "traces" or "paths".
func newTelemetry(what string) (*telemetry, error) {
	t := &telemetry{exported: &discard{}, paths: what == "paths"}
	var err error
	if what == "both" || what == "metrics" {
		t.reg = prometheus.NewRegistry() // the event bridge's parts register theirs (eventbridge.New)
	}
	if what == "both" || what == "traces" {
		if t.traces, err = otlp.NewProvider(context.Background(), "kfn-bench", sdktrace.NewBatchSpanProcessor(t.exported)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// scrape gathers the registry every second until ctx ends, as a Prometheus
// scraping every second would (thirty times more often than the chart's
// ServiceMonitors).
func (t *telemetry) scrape(ctx context.Context) {
	if t.reg == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_, _ = t.reg.Gather()
		}
	}
}

func (t *telemetry) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.traces.Shutdown(ctx)
}

// observability measures kfn with its metrics and traces against kfn
// without them, as the main benchmark measures its pipelines: both are
// built once, each on a NATS server of its own (natsURL's for the one
// without), warmed up, and measured in turns of o.slice, the order
// rotating, o.rounds times; a variant's figures are those of all its
// turns. A measurement of one after the other, even alternating and
// repeated, gave whichever ran in a quieter few seconds of the shared
// machine a lead of up to a tenth.
func observability(natsURL string, s *sink, sinkURL string, o options) error {
	switch o.observe {
	case "both", "metrics", "traces", "paths":
	default:
		return fmt.Errorf("-observability %q: want both, metrics, traces or paths", o.observe)
	}
	if o.sample <= 0 || o.sample > 1 {
		return fmt.Errorf("-sample %g: want a fraction in (0, 1]", o.sample)
	}
	sampled := "every trace sampled"
	if o.sample < 1 {
		// As an installation sets it: the SDK reads the sampler from these.
		os.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
		os.Setenv("OTEL_TRACES_SAMPLER_ARG", strconv.FormatFloat(o.sample, 'g', -1, 64))
		sampled = fmt.Sprintf("%g of traces sampled", o.sample)
	}
	var obs *telemetry
	var err error
	as(partObserved, func() { obs, err = newTelemetry(o.observe) })
	if err != nil {
		return err
	}
	observedNATS, stopNATS, err := startNATSAs(partObservedNATS)
	if err != nil {
		return err
	}
	defer stopNATS()
	var plain, observed *pipeline
	as(partKfn, func() { plain, err = kfn(natsURL, sinkURL, o, nil) })
	if err != nil {
		return err
	}
	defer plain.cleanup()
	as(partObserved, func() { observed, err = kfn(observedNATS.ClientURL(), sinkURL, o, obs) })
	if err != nil {
		return err
	}
	defer observed.cleanup()
	var ratios []float64
	loads, timings, err := alternate(plain, observed, s, o, func(round int, order []*pipeline, roundLoads map[string]load, roundTimings map[string]timing) {
		for _, p := range order {
			l, t := roundLoads[p.name], roundTimings[p.name]
			fmt.Printf("round %d  %-7s throughput %8.0f events/s  CPU %5.1f µs/event  allocated %5.1f KiB/event   latency at %d/s: p99 %6.2f ms  (undelivered %d)\n",
				round, p.name, l.rate(), l.cpuPerEvent(), l.allocPerEvent()/1024, o.rate, ms(t.percentile(99)), t.lost)
		}
		ratios = append(ratios, roundLoads[observed.name].rate()/roundLoads[plain.name].rate())
	})
	if err != nil {
		return err
	}
	without, with := loads[plain.name], loads[observed.name]
	p99Without, p99With := ms(timings[plain.name].percentile(99)), ms(timings[observed.name].percentile(99))
	what := map[string]string{"both": "metrics and traces", "metrics": "metrics", "traces": "traces", "paths": "events' paths recorded"}[o.observe]
	if o.observe == "both" || o.observe == "traces" {
		what += " (" + sampled + ")"
	}
	fmt.Printf("\nall turns   without: %8.0f events/s  %5.1f µs/event  %5.1f KiB/event   with: %8.0f events/s  %5.1f µs/event  %5.1f KiB/event  (spans exported %d)\n",
		without.rate(), without.cpuPerEvent(), without.allocPerEvent()/1024, with.rate(), with.cpuPerEvent(), with.allocPerEvent()/1024, obs.exported.count())
	fmt.Printf("with/without %s: throughput %.3f (by round: %.3f), CPU per event %.3f (target: throughput >= 0.95, they cost under 5%%)\n",
		what, with.rate()/without.rate(), ratios, with.cpuPerEvent()/without.cpuPerEvent())
	const group = "event bridge"
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("throughput with %s, %d B events", what, o.size), Unit: "events/s", Value: with.rate(),
			Anchor: "the same pipeline without them", AnchorValue: without.rate(),
			Target: figures.Target{MinRatio: 0.95, Text: ">= 95% of the run without (they cost < 5%)"}},
		figures.Figure{Group: group, Name: fmt.Sprintf("CPU per event with %s (NATS, pipeline, sink and load generator)", what), Unit: "µs", Value: with.cpuPerEvent(),
			Anchor: "the same pipeline without them", AnchorValue: without.cpuPerEvent()},
		figures.Figure{Group: group, Name: fmt.Sprintf("p99 latency at %d events/s with %s", o.rate, what), Unit: "ms", Value: p99With,
			Anchor: "the same pipeline without them", AnchorValue: p99Without},
	)
}

// alternate warms up a and b, then measures them in turns
// (measureInTurns) o.rounds times, the first to go alternating, and
// returns each one's loads and timings over all rounds; each is called
// with every round's, in the order they went.
func alternate(a, b *pipeline, s *sink, o options, each func(round int, order []*pipeline, loads map[string]load, timings map[string]timing)) (map[string]load, map[string]timing, error) {
	for _, p := range []*pipeline{a, b} {
		if _, err := throughput(p, s, o, time.Second); err != nil { // warm-up
			return nil, nil, err
		}
	}
	loads, timings := map[string]load{}, map[string]timing{}
	for round := 1; round <= o.rounds; round++ {
		order := []*pipeline{a, b}
		if round%2 == 0 {
			order = []*pipeline{b, a}
		}
		roundLoads, roundTimings, err := measureInTurns(order, s, o)
		if err != nil {
			return nil, nil, err
		}
		each(round, order, roundLoads, roundTimings)
		for _, p := range order {
			loads[p.name] = loads[p.name].add(roundLoads[p.name])
			timings[p.name] = timings[p.name].add(roundTimings[p.name])
		}
	}
	return loads, timings, nil
}

// cpuTime is the CPU time (user and system) this process used so far:
// NATS, the pipeline and the load generator together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocated is the bytes this process allocated so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
