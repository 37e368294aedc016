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
// each up and measures its throughput and its latency at o.rate. The best
// round of each counts, as in the main benchmark.
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
	type result struct {
		throughput float64
		p99        time.Duration
		spans      int
	}
	best := map[string]result{}
	cpu := map[string][]float64{} // µs per event, every round
	var ratios []float64
	for round := 1; round <= o.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		got := map[bool]float64{}
		for _, observed := range order {
			var obs *telemetry
			if observed {
				var err error
				if obs, err = newTelemetry(o.observe); err != nil {
					return err
				}
			}
			p, err := kfn(natsURL, sinkURL, o, obs)
			if err != nil {
				return err
			}
			if _, err := throughput(p, s, o, time.Second); err != nil {
				p.cleanup()
				return err
			}
			cpu0, alloc0 := cpuTime(), allocated()
			before := s.delivered.Load()
			tp, err := throughput(p, s, o, o.duration)
			if err != nil {
				p.cleanup()
				return err
			}
			events := max(s.delivered.Load()-before, 1)
			cpuPerEvent := (cpuTime() - cpu0) / time.Duration(events)
			allocPerEvent := float64(allocated()-alloc0) / float64(events)
			_, p99, lost, err := latency(p, s, o)
			p.cleanup()
			if err != nil {
				return err
			}
			spans := 0
			if obs != nil {
				spans = obs.exported.spans
			}
			fmt.Printf("round %d  %-7s throughput %8.0f events/s  CPU %5.1f µs/event  allocated %5.1f KiB/event   latency at %d/s: p99 %6.2f ms  (undelivered %d, spans exported %d)\n",
				round, p.name, tp, float64(cpuPerEvent)/float64(time.Microsecond), allocPerEvent/1024, o.rate, ms(p99), lost, spans)
			got[observed] = tp
			cpu[p.name] = append(cpu[p.name], float64(cpuPerEvent)/float64(time.Microsecond))
			r, seen := best[p.name]
			if !seen || tp > r.throughput {
				r.throughput, r.spans = tp, spans
			}
			if !seen || p99 < r.p99 {
				r.p99 = p99
			}
			best[p.name] = r
		}
		ratios = append(ratios, got[true]/got[false])
	}
	plain, observed := best["kfn"], best["kfn+obs"]
	ratio := observed.throughput / plain.throughput
	fmt.Printf("\nbest   kfn      throughput %8.0f events/s   p99 %6.2f ms\n", plain.throughput, ms(plain.p99))
	fmt.Printf("best   kfn+obs  throughput %8.0f events/s   p99 %6.2f ms\n", observed.throughput, ms(observed.p99))
	what := map[string]string{"both": "metrics and traces", "metrics": "metrics", "traces": "traces"}[o.observe]
	if o.observe != "metrics" {
		what += " (" + sampled + ")"
	}
	fmt.Printf("\nwith/without %s, throughput: %.3f (best rounds; per round %.3f) (target >= 0.95: they cost under 5%%)\n", what, ratio, ratios)
	const group = "event bridge"
	plainCPU, observedCPU := median(cpu["kfn"]), median(cpu["kfn+obs"])
	fmt.Printf("CPU per event (median of rounds): %.1f µs with, %.1f µs without: %.3f\n", observedCPU, plainCPU, observedCPU/plainCPU)
	return figures.Append(o.figures,
		figures.Figure{Group: group, Name: fmt.Sprintf("CPU per event with %s (NATS, pipeline and load generator)", what), Unit: "µs", Value: observedCPU,
			Anchor: "the same pipeline without them", AnchorValue: plainCPU},
		figures.Figure{Group: group, Name: fmt.Sprintf("throughput with %s, %d B events", what, o.size), Unit: "events/s", Value: observed.throughput,
			Anchor: "the same pipeline without them", AnchorValue: plain.throughput,
			Target: figures.Target{MinRatio: 0.95, Text: ">= 95% of the run without (they cost < 5%)"}},
		figures.Figure{Group: group, Name: fmt.Sprintf("p99 latency at %d events/s with %s", o.rate, what), Unit: "ms", Value: ms(observed.p99),
			Anchor: "the same pipeline without them", AnchorValue: ms(plain.p99)},
	)
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
