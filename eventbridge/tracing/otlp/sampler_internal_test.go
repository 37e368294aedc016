package otlp

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sequence is an ID generator of ids 1, 2, 3... spread over their bytes,
// the same for every provider made with a new one.
type sequence struct{ n uint64 }

func (s *sequence) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var id trace.TraceID
	s.n++
	binary.BigEndian.PutUint64(id[8:], s.n*0x9e3779b97f4a7c15) // the ratio reads these bytes
	id[0] = 1
	return id, s.NewSpanID(ctx, id)
}

func (s *sequence) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var id trace.SpanID
	s.n++
	binary.BigEndian.PutUint64(id[:], s.n)
	return id
}

// decisions starts 300 spans of tp: new traces, and children of a remote
// parent sampled and not, and returns whether each was sampled.
func decisions(tp trace.TracerProvider) []bool {
	tr := tp.Tracer("test")
	var out []bool
	for i := range 300 {
		ctx := context.Background()
		if i%3 > 0 {
			var tid trace.TraceID
			binary.BigEndian.PutUint64(tid[8:], uint64(i)*0x9e3779b97f4a7c15)
			tid[0] = 2
			flags := trace.TraceFlags(0)
			if i%3 == 1 {
				flags = trace.FlagsSampled
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: flags, Remote: true}))
		}
		_, span := tr.Start(ctx, "span")
		out = append(out, span.SpanContext().IsSampled())
		span.End()
	}
	return out
}

// The sampler the provider is given (samplerFromEnv) decides as the one
// the SDK of go.mod makes of the same variables itself, for every
// OTEL_TRACES_SAMPLER it knows and some it does not: the provider's Roots
// decide new traces with it.
func TestSamplerFromEnvIsTheSDKs(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_TRACES_SAMPLER": ""},
		{"OTEL_TRACES_SAMPLER": "parentbased_always_on"},
		{"OTEL_TRACES_SAMPLER": "parentbased_always_off"},
		{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.3"},
		{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "a tenth"},
		{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"},
		{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"},
		{"OTEL_TRACES_SAMPLER": " ParentBased_TraceIDRatio ", "OTEL_TRACES_SAMPLER_ARG": " 0.5 "},
		{"OTEL_TRACES_SAMPLER": "always_off"},
		{"OTEL_TRACES_SAMPLER": "always_on"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "-1"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
		{"OTEL_TRACES_SAMPLER": "traceidratio"},
		{"OTEL_TRACES_SAMPLER": "jaeger_remote"},
	} {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			for _, k := range []string{"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
				t.Setenv(k, "") // restored after the test
				require.NoError(t, os.Unsetenv(k))
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			sdk := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(&sequence{})) // reads the variables
			sampler := samplerFromEnv()
			ours := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(&sequence{}), sdktrace.WithSampler(sampler))
			want, got := decisions(sdk), decisions(ours)
			assert.Equal(t, want, got)
		})
	}
}
