package otlp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
)

// collector is an OTLP/HTTP receiver: it keeps the span names and the
// service.name of every export request.
type collector struct {
	mu       sync.Mutex
	paths    []string
	spans    []string
	services []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, r.URL.Path)
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				c.services = append(c.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME"} {
		t.Setenv(k, "")
	}
}

// TestExportsOverOTLP: with an endpoint, from the flag or from the
// standard variables, spans reach an OTLP/HTTP receiver by Shutdown.
func TestExportsOverOTLP(t *testing.T) {
	tests := map[string]struct {
		flag        bool
		env         string // the variable that names the collector
		serviceName string // OTEL_SERVICE_NAME
		wantService string
	}{
		"flag":              {flag: true, wantService: "kfn-eventbridge"},
		"OTLP endpoint":     {env: "OTEL_EXPORTER_OTLP_ENDPOINT", wantService: "kfn-eventbridge"},
		"traces endpoint":   {env: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", wantService: "kfn-eventbridge"},
		"OTEL_SERVICE_NAME": {flag: true, serviceName: "bridge-eu", wantService: "bridge-eu"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			c := &collector{}
			srv := httptest.NewServer(c)
			defer srv.Close()
			var cfg otlp.Config
			switch {
			case tt.flag:
				cfg.Endpoint = srv.URL + "/v1/traces"
			case tt.env == "OTEL_EXPORTER_OTLP_ENDPOINT":
				t.Setenv(tt.env, srv.URL) // the exporter adds /v1/traces
			default:
				t.Setenv(tt.env, srv.URL+"/v1/traces")
			}
			if tt.serviceName != "" {
				t.Setenv("OTEL_SERVICE_NAME", tt.serviceName)
			}
			require.True(t, cfg.Enabled())
			p, err := otlp.Start(context.Background(), cfg)
			require.NoError(t, err)
			require.True(t, p.Enabled)
			_, span := p.Tracer("test").Start(context.Background(), "deliver default/orders")
			span.End()
			require.NoError(t, p.Shutdown(context.Background()))
			c.mu.Lock()
			defer c.mu.Unlock()
			assert.Equal(t, []string{"deliver default/orders"}, c.spans)
			assert.Equal(t, []string{"/v1/traces"}, c.paths)
			assert.Equal(t, []string{tt.wantService}, c.services)
		})
	}
}

// TestOffWithoutEndpoint: no endpoint, or the standard variables turning
// the SDK or the exporter off, means a no-op provider.
func TestOffWithoutEndpoint(t *testing.T) {
	tests := map[string]map[string]string{
		"nothing set":  {},
		"SDK disabled": {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
		"exporter off": {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			p, err := otlp.Start(context.Background(), otlp.Config{})
			require.NoError(t, err)
			assert.False(t, p.Enabled)
			_, span := p.Tracer("test").Start(context.Background(), "x")
			assert.False(t, span.IsRecording())
			span.End()
			require.NoError(t, p.Shutdown(context.Background()))
		})
	}
}

func TestRefusesAnEndpointThatIsNoURL(t *testing.T) {
	clearEnv(t)
	_, err := otlp.Start(context.Background(), otlp.Config{Endpoint: "collector:4318"})
	require.ErrorIs(t, err, otlp.ErrInvalidConfig)
}

// TestSkipsUnsampledIsWhatTheSamplerDoes: for each OTEL_TRACES_SAMPLER the
// SDK knows (and some it does not), SkipsUnsampled says whether the
// provider's sampler records a child of a remote parent that was not
// sampled, as the SDK of go.mod does: the publisher and the dispatcher make
// no span of an unsampled trace only when none would be recorded.
func TestSkipsUnsampledIsWhatTheSamplerDoes(t *testing.T) {
	samplers := []map[string]string{
		{},
		{"OTEL_TRACES_SAMPLER": ""},
		{"OTEL_TRACES_SAMPLER": "parentbased_always_on"},
		{"OTEL_TRACES_SAMPLER": "parentbased_always_off"},
		{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1"},
		{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "a tenth"},
		{"OTEL_TRACES_SAMPLER": " ParentBased_TraceIDRatio ", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
		{"OTEL_TRACES_SAMPLER": "always_off"},
		{"OTEL_TRACES_SAMPLER": "always_on"},
		{"OTEL_TRACES_SAMPLER": " ALWAYS_ON"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "not a number"},
		{"OTEL_TRACES_SAMPLER": "traceidratio"},
		{"OTEL_TRACES_SAMPLER": "jaeger_remote"},
		{"OTEL_TRACES_SAMPLER": "no such sampler"},
	}
	for _, env := range samplers {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			clearEnv(t)
			for _, k := range []string{"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
				t.Setenv(k, "") // restored after the test
				require.NoError(t, os.Unsetenv(k))
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			p, err := otlp.NewProvider(context.Background(), "test", sdktrace.NewSimpleSpanProcessor(tracetest.NewInMemoryExporter()))
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
			recorded := false
			for _, id := range []string{"00000000000000000000000000000001", "7fffffffffffffff0000000000000000", "fffffffffffffffffffffffffffffffe"} {
				tid, err := trace.TraceIDFromHex(id)
				require.NoError(t, err)
				parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, Remote: true})
				_, span := p.Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "child")
				recorded = recorded || span.IsRecording()
				span.End()
			}
			assert.Equal(t, !recorded, p.SkipsUnsampled(), "a child of an unsampled parent recorded: %v", recorded)
			assert.True(t, tracing.SkipsUnsampled(p) == p.SkipsUnsampled(), "package tracing reads what the provider says")
		})
	}
}
