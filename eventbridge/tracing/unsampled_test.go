package tracing_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// theirs is what OpenTelemetry's propagator reads of a traceparent.
func theirs(traceParent string) trace.SpanContext {
	c := propagation.MapCarrier{"traceparent": traceParent}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
}

// agrees asserts that NotSampled says a traceparent is not sampled only
// when OpenTelemetry's propagator reads a valid, unsampled context of it.
func agrees(t *testing.T, traceParent string) {
	t.Helper()
	if tracing.NotSampled(traceParent) {
		sc := theirs(traceParent)
		assert.True(t, sc.IsValid() && !sc.IsSampled(), "NotSampled(%q), but the propagator reads %v", traceParent, sc)
	}
}

func TestNotSampled(t *testing.T) {
	const (
		tid = "0af7651916cd43dd8448eb211c80319c"
		sid = "b7ad6b7169203331"
	)
	for tp, want := range map[string]bool{
		"00-" + tid + "-" + sid + "-00":                      true,
		"00-" + tid + "-" + sid + "-02":                      true, // the random flag
		"00-" + tid + "-" + sid + "-01":                      false,
		"00-" + tid + "-" + sid + "-03":                      false,
		"00-" + tid + "-" + sid + "-04":                      false, // a reserved bit: invalid in version 00
		"00-" + tid + "-" + sid + "-10":                      false,
		"00-" + tid + "-" + sid + "-0":                       false,
		"00-" + tid + "-" + sid + "-000":                     false,
		"00-" + strings.ToUpper(tid) + "-" + sid + "-00":     false, // upper case is invalid
		"00-" + tid + "-" + strings.ToUpper(sid) + "-00":     false,
		"00-00000000000000000000000000000000-" + sid + "-00": false, // zero ids are invalid
		"00-" + tid + "-0000000000000000-00":                 false,
		"01-" + tid + "-" + sid + "-00":                      false, // another version: the propagator decides
		"ff-" + tid + "-" + sid + "-00":                      false,
		"00_" + tid + "-" + sid + "-00":                      false,
		"00-" + tid + "_" + sid + "-00":                      false,
		"00-" + tid + "-" + sid + "_00":                      false,
		"00-" + tid[:31] + "g-" + sid + "-00":                false,
		"00-" + tid + "-" + sid[:15] + "g-00":                false,
		"00-" + tid + "-" + sid + "-0g":                      false,
		"":                                                   false,
	} {
		assert.Equal(t, want, tracing.NotSampled(tp), "NotSampled(%q)", tp)
		agrees(t, tp)
		if want {
			sc := theirs(tp)
			assert.True(t, sc.IsValid() && !sc.IsSampled(), "the propagator reads %q as valid and not sampled", tp)
		}
	}
}

// FuzzNotSampled: whatever the value, NotSampled never says "not sampled"
// of a traceparent OpenTelemetry reads otherwise; and of every context the
// propagator writes, it says what the propagator reads.
func FuzzNotSampled(f *testing.F) {
	f.Add("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", []byte{1}, []byte{2}, byte(0))
	f.Add("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", []byte{}, []byte{}, byte(1))
	f.Add("", []byte{0}, []byte{0}, byte(3))
	f.Fuzz(func(t *testing.T, traceParent string, traceID, spanID []byte, flags byte) {
		agrees(t, traceParent)
		var cfg trace.SpanContextConfig
		copy(cfg.TraceID[:], traceID)
		copy(cfg.SpanID[:], spanID)
		cfg.TraceFlags = trace.TraceFlags(flags)
		sc := trace.NewSpanContext(cfg)
		var written tracing.TraceContext
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), &written)
		if written.Parent == "" {
			return // an invalid context is not written
		}
		read := theirs(written.Parent)
		assert.Equal(t, read.IsValid() && !read.IsSampled(), tracing.NotSampled(written.Parent), "NotSampled(%q)", written.Parent)
	})
}

// TestSkipsUnsampled: only a provider that says so skips the spans of an
// unsampled parent.
func TestSkipsUnsampled(t *testing.T) {
	assert.False(t, tracing.SkipsUnsampled(noop.NewTracerProvider()), "a provider that does not say")
	assert.False(t, tracing.SkipsUnsampled(nil))
	assert.True(t, tracing.SkipsUnsampled(saying{skips: true}))
	assert.False(t, tracing.SkipsUnsampled(saying{skips: false}))
}

// saying is a tracer provider that says whether it skips unsampled spans.
type saying struct {
	noop.TracerProvider
	skips bool
}

func (s saying) SkipsUnsampled() bool { return s.skips }
