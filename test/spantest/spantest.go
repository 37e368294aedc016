package spantest

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
}

// counter is the default sampler, counting the spans it is asked about.
type counter struct{ n atomic.Int64 }

func (c *counter) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	c.n.Add(1)
	return sdktrace.ParentBased(sdktrace.AlwaysSample()).ShouldSample(p)
}

func (*counter) Description() string { return "spantest: parent-based, always on, counted" }

// New returns a Provider that says it skips the spans of unsampled
// parents when skips is true; it is shut down when t ends.
func New(t *testing.T, skips bool) Provider {
	exp := tracetest.NewInMemoryExporter()
	c := &counter{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(c))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return Provider{TracerProvider: tp, Spans: exp, skips: skips, asked: c}
}

// SkipsUnsampled says what New was told (tracing.SkipsUnsampled reads it).
func (p Provider) SkipsUnsampled() bool { return p.skips }

// Started is how many spans were started so far: the sampler is asked of
// each.
func (p Provider) Started() int64 { return p.asked.n.Load() }
