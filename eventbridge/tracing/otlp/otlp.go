package otlp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/HTTP traces URL, as
	// http://collector:4318/v1/traces. Empty: the standard variables
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
	// decide, and without them tracing is off.
	Endpoint string
	// ServiceName is the service.name of the spans unless
	// OTEL_SERVICE_NAME says otherwise.
	ServiceName string
}

// Enabled reports whether spans are to be exported: an endpoint is set
// (c.Endpoint or the standard variables), OTEL_SDK_DISABLED is not true and
// OTEL_TRACES_EXPORTER is not none.
func (c Config) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// ErrInvalidConfig is wrapped by Start's errors about its Config.
var ErrInvalidConfig = errors.New("invalid tracing configuration")

// Provider is a tracer provider and how to stop it.
type Provider struct {
	trace.TracerProvider
	// Enabled is true when spans are exported (Config.Enabled).
	Enabled bool
	// skipsUnsampled: the sampler records no span whose parent was not
	// sampled (SkipsUnsampled).
	skipsUnsampled bool
	// roots decide a new trace's sampling with the provider's sampler
	// (Roots); nil for the no-op provider.
	roots *tracing.Roots
	// shutdown flushes and stops the exporter.
	shutdown func(context.Context) error
}

// SkipsUnsampled reports whether the provider's sampler records no span
// whose parent was not sampled: OTEL_TRACES_SAMPLER unset (the SDK's
// default, parent-based always on), parentbased_always_on,
// parentbased_always_off, parentbased_traceidratio or always_off, or a
// value the SDK does not know (it keeps its default). always_on and
// traceidratio (even with an argument it cannot read) decide for each
// span alone. The publisher and the dispatcher skip the spans of an
// unsampled trace when it is true (package tracing, SkipsUnsampled).
func (p Provider) SkipsUnsampled() bool { return p.skipsUnsampled }

// Roots decides a new trace's sampling before its first span is started,
// with the provider's own sampler and the trace id the provider's span
// then gets (package tracing, RootsOf); nil when spans are not exported.
func (p Provider) Roots() *tracing.Roots { return p.roots }

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the OpenTelemetry specification and
// the SDK read them: unset, parent-based always on; always_on,
// always_off, traceidratio, parentbased_always_on, parentbased_always_off,
// parentbased_traceidratio; a ratio argument missing, or not a number
// from 0 to 1, is 1; an unknown sampler is the default. The provider is
// given it (rather than reading the variables itself) so that its Roots
// decide with the same sampler; the SDK still reads them, and reports a
// value it cannot use to OpenTelemetry's error handler.
func samplerFromEnv() sdktrace.Sampler {
	name, set := os.LookupEnv("OTEL_TRACES_SAMPLER")
	if !set {
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	ratio := func() sdktrace.Sampler {
		v, err := strconv.ParseFloat(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG")), 64)
		if err != nil || v < 0 || v > 1 {
			return sdktrace.TraceIDRatioBased(1)
		}
		return sdktrace.TraceIDRatioBased(v)
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return ratio()
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio())
	default:
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
}

// skipsUnsampled is SkipsUnsampled of the sampler the SDK makes of
// OTEL_TRACES_SAMPLER (sdk/trace, samplerFromEnv).
func skipsUnsampled() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER"))) {
	case "always_on", "traceidratio":
		return false
	}
	return true
}

// Shutdown exports the spans not yet exported and stops, within ctx.
func (p Provider) Shutdown(ctx context.Context) error {
	if p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// Start returns the tracer provider for c: when c.Enabled, the SDK's, with
// a batch span processor exporting over OTLP/HTTP (the exporter reads the
// standard OTEL_EXPORTER_OTLP_* variables for what c does not set:
// headers, timeout, compression, certificates), the sampler of
// OTEL_TRACES_SAMPLER (default: parent-based, always on) and the resource
// of OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME; otherwise a no-op
// provider, whose spans cost nothing measurable. Nothing is sent before the
// first span ends.
func Start(ctx context.Context, c Config) (Provider, error) {
	if !c.Enabled() {
		return Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	var opts []otlptracehttp.Option
	if c.Endpoint != "" {
		if !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
			return Provider{}, fmt.Errorf("%w: trace endpoint %q is not an http(s) URL", ErrInvalidConfig, c.Endpoint)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(c.Endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return Provider{}, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return NewProvider(ctx, c.ServiceName, sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithBatchTimeout(time.Second)))
}

// NewProvider returns an SDK tracer provider sending every span to
// processor, with the resource Start gives (service.name serviceName
// unless OTEL_SERVICE_NAME is set). Tests and benchmarks pass their own
// processor and exporter.
func NewProvider(ctx context.Context, serviceName string, processor sdktrace.SpanProcessor) (Provider, error) {
	if serviceName == "" {
		serviceName = "kfn-eventbridge"
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return Provider{}, fmt.Errorf("trace resource: %w", err)
	}
	sampler := samplerFromEnv()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(processor),
		sdktrace.WithSampler(sampler), sdktrace.WithIDGenerator(tracing.IDs{}))
	return Provider{TracerProvider: tp, Enabled: true, skipsUnsampled: skipsUnsampled(), roots: tracing.NewRoots(sampler), shutdown: tp.Shutdown}, nil
}
