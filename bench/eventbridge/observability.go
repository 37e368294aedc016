package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
)

// telemetry is what the event bridge records in a cluster, pointed at
// in-process sinks: a Prometheus registry scraped every second, and a
// tracer provider sampling every span, batching them to an exporter that
// discards them.
type telemetry struct {
	reg        *prometheus.Registry
	publisher  *publisher.Metrics
	dispatcher *dispatcher.Metrics
	traces     otlp.Provider
	exported   *discard
}

// discard is a span exporter that drops every span (counting them).
type discard struct{ spans int }

func (d *discard) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	d.spans += len(spans) // the batch processor calls it from one goroutine
	return nil
}

func (*discard) Shutdown(context.Context) error { return nil }

// newTelemetry records what: "both", "metrics" or "traces".
func newTelemetry(what string) (*telemetry, error) {
	t := &telemetry{exported: &discard{}}
	var err error
	if what == "both" || what == "metrics" {
		t.reg = prometheus.NewRegistry()
		if t.publisher, err = publisher.NewMetrics(t.reg); err != nil {
			return nil, err
		}
		if t.dispatcher, err = dispatcher.NewMetrics(t.reg); err != nil {
			return nil, err
		}
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
// without them: each round builds both pipelines afresh on the same NATS
// server, one after the other (the order alternates between rounds), warms
// each up and measures its throughput, the CPU time and bytes allocated
// per event meanwhile, and its latency at o.rate. The figures are the
// medians over the rounds: unlike the main benchmark's best round, a ratio
// of two best rounds mostly measures which variant got the luckier round.
func observability(natsURL string, s *sink, sinkURL string, o options) error {
	switch o.observe {
	case "both", "metrics", "traces":
	default:
		return fmt.Errorf("-observability %q: want both, metrics or traces", o.observe)
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
	type series struct{ throughput, cpu, alloc, p99 []float64 }
	runs := map[bool]*series{false: {}, true: {}}
	var ratios []float64
	for round := 1; round <= o.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		got := map[bool]float64{}
		for _, observed := range order {
			r, err := observeRun(natsURL, s, sinkURL, o, observed)
			if err != nil {
				return err
			}
			fmt.Printf("round %d  %-7s throughput %8.0f events/s  CPU %5.1f µs/event  allocated %5.1f KiB/event   latency at %d/s: p99 %6.2f ms  (undelivered %d, spans exported %d)\n",
				round, r.name, r.throughput, r.cpu, r.alloc/1024, o.rate, ms(r.p99), r.lost, r.spans)
			got[observed] = r.throughput
			sr := runs[observed]
			sr.throughput = append(sr.throughput, r.throughput)
			sr.cpu = append(sr.cpu, r.cpu)
			sr.alloc = append(sr.alloc, r.alloc)
			sr.p99 = append(sr.p99, ms(r.p99))
		}
		ratios = append(ratios, got[true]/got[false])
	}
	plain, observed := runs[false], runs[true]
	what := map[string]string{"both": "metrics and traces", "metrics": "metrics", "traces": "traces"}[o.observe]
	if o.observe != "metrics" {
		what += " (" + sampled + ")"
	}
	fmt.Printf("\nmedian of %d rounds   without: %8.0f events/s  %5.1f µs/event  %5.1f KiB/event   with: %8.0f events/s  %5.1f µs/event  %5.1f KiB/event\n",
		o.rounds, median(plain.throughput), median(plain.cpu), median(plain.alloc)/1024, median(observed.throughput), median(observed.cpu), median(observed.alloc)/1024)
	fmt.Printf("with/without %s: throughput %.3f (rounds paired: %.3f, median %.3f), CPU per event %.3f (target: throughput >= 0.95, they cost under 5%%)\n",
		what, median(observed.throughput)/median(plain.throughput), ratios, median(ratios), median(observed.cpu)/median(plain.cpu))
	const group = "event bridge"
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("throughput with %s, %d B events", what, o.size), Unit: "events/s", Value: median(observed.throughput),
			Anchor: "the same pipeline without them", AnchorValue: median(plain.throughput),
			Target: figures.Target{MinRatio: 0.95, Text: ">= 95% of the run without (they cost < 5%)"}},
		figures.Figure{Group: group, Name: fmt.Sprintf("CPU per event with %s (NATS, pipeline and load generator)", what), Unit: "µs", Value: median(observed.cpu),
			Anchor: "the same pipeline without them", AnchorValue: median(plain.cpu)},
		figures.Figure{Group: group, Name: fmt.Sprintf("p99 latency at %d events/s with %s", o.rate, what), Unit: "ms", Value: median(observed.p99),
			Anchor: "the same pipeline without them", AnchorValue: median(plain.p99)},
	)
}

// measured is one measured run of a pipeline.
type measured struct {
	name       string
	throughput float64
	cpu        float64 // µs per event
	alloc      float64 // bytes per event
	p99        time.Duration
	lost       int
	spans      int
}

// observeRun builds kfn (with its metrics and traces when observed), warms
// it up, measures it and takes it down.
func observeRun(natsURL string, s *sink, sinkURL string, o options, observed bool) (measured, error) {
	var obs *telemetry
	if observed {
		var err error
		if obs, err = newTelemetry(o.observe); err != nil {
			return measured{}, err
		}
	}
	var p *pipeline
	var err error
	as(partKfn, func() { p, err = kfn(natsURL, sinkURL, o, obs) })
	if err != nil {
		return measured{}, err
	}
	r := measured{name: p.name}
	if _, err := throughput(p, s, o, time.Second); err != nil {
		p.cleanup()
		return measured{}, err
	}
	cpu0, alloc0, before := cpuTime(), allocated(), s.delivered.Load()
	if r.throughput, err = throughput(p, s, o, o.duration); err != nil {
		p.cleanup()
		return measured{}, err
	}
	events := max(s.delivered.Load()-before, 1)
	r.cpu = float64((cpuTime()-cpu0)/time.Duration(events)) / float64(time.Microsecond)
	r.alloc = float64(allocated()-alloc0) / float64(events)
	_, r.p99, r.lost, err = latency(p, s, o)
	p.cleanup()
	if obs != nil {
		r.spans = obs.exported.spans
	}
	return r, err
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
