package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// A new trace not sampled is a valid W3C traceparent, unsampled, of a new
// trace each time; a sampled one is no traceparent but a context from
// which IDs gives the span the trace id the sampler was asked about.
func TestRootsDecideBeforeASpan(t *testing.T) {
	ctx := context.Background()
	never := tracing.NewRoots(sdktrace.ParentBased(sdktrace.NeverSample()))
	seen := map[string]bool{}
	for range 100 {
		got, traceParent := never.Start(ctx, "POST /publish", trace.SpanKindServer)
		assert.Equal(t, ctx, got, "no span: the context as it was")
		require.True(t, tracing.NotSampled(traceParent), "%q", traceParent)
		sc := theirs(traceParent)
		require.True(t, sc.IsValid() && !sc.IsSampled(), "the propagator reads %q as a valid, unsampled context", traceParent)
		assert.False(t, seen[sc.TraceID().String()], "a new trace each time")
		seen[sc.TraceID().String()] = true
	}

	var asked trace.TraceID
	always := tracing.NewRoots(sdktrace.AlwaysSample())
	got, traceParent := always.Start(ctx, "POST /publish", trace.SpanKindServer)
	assert.Empty(t, traceParent)
	traceID, spanID := tracing.IDs{}.NewIDs(got)
	require.True(t, traceID.IsValid() && spanID.IsValid())
	recorder := tracing.NewRoots(recordTraceID{&asked})
	got, _ = recorder.Start(ctx, "POST /publish", trace.SpanKindServer)
	traceID, _ = tracing.IDs{}.NewIDs(got)
	assert.Equal(t, asked, traceID, "the span gets the trace id the sampler decided on")
	other, _ := tracing.IDs{}.NewIDs(ctx)
	assert.NotEqual(t, asked, other, "without a decision, a random one")
	assert.True(t, tracing.IDs{}.NewSpanID(ctx, other).IsValid())
}

// recordTraceID samples every span, keeping the trace id it was asked
// about.
type recordTraceID struct{ id *trace.TraceID }

func (r recordTraceID) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	*r.id = p.TraceID
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (recordTraceID) Description() string { return "records the trace id" }

// A ratio's decisions are the ratio's, over many new traces.
func TestRootsSampleTheRatio(t *testing.T) {
	roots := tracing.NewRoots(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1)))
	sampled := 0
	for range 10000 {
		if _, traceParent := roots.Start(context.Background(), "POST /publish", trace.SpanKindServer); traceParent == "" {
			sampled++
		}
	}
	assert.InDelta(t, 1000, sampled, 150)
}

// A provider that does not say how it decides new traces has no Roots:
// its spans are started for its sampler to decide.
func TestRootsOf(t *testing.T) {
	assert.Nil(t, tracing.RootsOf(sdktrace.NewTracerProvider()))
}
