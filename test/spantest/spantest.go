package spantest

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// Provider is an SDK tracer provider with the SDK's default sampler
// (parent-based, always on), its spans kept in Spans as they end.
type Provider struct {
	*sdktrace.TracerProvider
	// Spans has every span ended (a synchronous processor: a span is in
	// it once End returns).
	Spans *tracetest.InMemoryExporter
	skips bool
	asked *counter
	roots *tracing.Roots
}

// counter is a sampler counting the spans it is asked about.
type counter struct {
	n       atomic.Int64
	sampler sdktrace.Sampler
}

func (c *counter) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	c.n.Add(1)
	return c.sampler.ShouldSample(p)
}

func (c *counter) Description() string { return "spantest: counted " + c.sampler.Description() }

// New returns a Provider that says it skips the spans of unsampled
// parents when skips is true; it is shut down when t ends.
func New(t *testing.T, skips bool) Provider {
	exp := tracetest.NewInMemoryExporter()
	c := &counter{sampler: sdktrace.ParentBased(sdktrace.AlwaysSample())}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(c))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return Provider{TracerProvider: tp, Spans: exp, skips: skips, asked: c}
}

// WithRoots returns a Provider of sampler, as otlp.Provider makes one:
// it skips the spans of unsampled parents when sampler does (parent-based
// samplers), decides a new trace's sampling before its span is started
// (tracing.RootsOf: those decisions are not counted in Started) and gives
// a sampled one's span the trace id decided on (tracing.IDs).
func WithRoots(t *testing.T, sampler sdktrace.Sampler, parentBased bool) Provider {
	exp := tracetest.NewInMemoryExporter()
	c := &counter{sampler: sampler}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(c), sdktrace.WithIDGenerator(tracing.IDs{}))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return Provider{TracerProvider: tp, Spans: exp, skips: parentBased, asked: c, roots: tracing.NewRoots(sampler)}
}

// Roots is the Provider's tracing.Roots: nil unless made by WithRoots.
func (p Provider) Roots() *tracing.Roots { return p.roots }

// SkipsUnsampled says what New was told (tracing.SkipsUnsampled reads it).
func (p Provider) SkipsUnsampled() bool { return p.skips }

// Started is how many spans were started so far: the sampler is asked of
// each.
func (p Provider) Started() int64 { return p.asked.n.Load() }
