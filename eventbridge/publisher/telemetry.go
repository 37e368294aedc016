package publisher

import (
	"net/http"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// WithTracerProvider makes the publisher record a server span for each
// publish request, named after its route ("POST /publish", "POST
// /{app}/v2/events", "POST /{app}/v1/events"), child of the request's W3C
// trace context (traceparent, tracestate; its baggage is kept), with the
// event's id and type (or the batch size) and the status code. The
// span's context, not the request's, is stored with the events, so their
// deliveries are its children. Without it no span is made and the request's
// trace context is stored as it came; so too for a request whose
// traceparent is not sampled when tp records no child of an unsampled
// parent (tracing.SkipsUnsampled), its baggage stored as with a span.
// A request without a traceparent starts a trace: with a provider that
// decides its sampling first (tracing.RootsOf), one not sampled gets no
// span either, and the traceparent of a new unsampled trace is stored
// with its events, as its span's would be.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(p *Publisher) error {
		if tp != nil {
			p.tracer = tp.Tracer("github.com/kfn-dev/kfn/eventbridge/publisher")
			p.skipUnsampled = tracing.SkipsUnsampled(tp)
			p.roots = tracing.RootsOf(tp)
		}
		return nil
	}
}

// instrument serves a publishing endpoint through serve, which returns the
// status it answered: the request is counted under endpoint, timed when it
// stored its events (2xx), and traced under the route's span name.
func (p *Publisher) instrument(endpoint, route string, serve func(http.ResponseWriter, *http.Request) int) http.HandlerFunc {
	m := p.metrics.forEndpoint(endpoint)
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var span trace.Span
		switch {
		case p.tracer == nil:
		case p.skipUnsampled && tracing.NotSampled(r.Header.Get("Traceparent")):
			// No span would be recorded: the request's trace context is
			// stored as it came (traceContext), with its baggage.
			r = withBaggage(r)
		case p.roots != nil && len(r.Header["Traceparent"]) == 0:
			// A new trace: decided before a span is started.
			ctx, traceParent := p.roots.Start(r.Context(), route, trace.SpanKindServer)
			if traceParent != "" {
				// Not sampled: stored as a request's own (traceContext);
				// a tracestate that came without a traceparent is no
				// trace context (W3C) and goes, as the propagator drops it.
				r.Header["Traceparent"] = []string{traceParent}
				delete(r.Header, "Tracestate")
				r = withBaggage(r)
				break
			}
			ctx, span = p.tracer.Start(tracing.Propagator.Extract(ctx, tracing.HeaderCarrier(r.Header)), route, serverSpan...)
			r = r.WithContext(ctx)
		default:
			ctx := tracing.Propagator.Extract(r.Context(), tracing.HeaderCarrier(r.Header))
			ctx, span = p.tracer.Start(ctx, route, serverSpan...)
			r = r.WithContext(ctx)
		}
		code := serve(w, r)
		if span != nil && span.IsRecording() {
			span.SetAttributes(semconv.HTTPResponseStatusCode(code))
			if code >= 500 {
				span.SetStatus(codes.Error, http.StatusText(code))
			}
		}
		if span != nil {
			span.End()
		}
		m.published(code, time.Since(start))
	}
}

// withBaggage returns r with the W3C baggage of its headers in its
// context, for the events it stores; r itself when it has none.
func withBaggage(r *http.Request) *http.Request {
	if ctx := (propagation.Baggage{}).Extract(r.Context(), tracing.HeaderCarrier(r.Header)); ctx != r.Context() {
		return r.WithContext(ctx)
	}
	return r
}

// serverSpan are the options of a publish request's span, made once: each
// option given in the call is a slice and an interface value allocated
// per span.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// traceContext is the trace context to store with the events of r: its
// span's when it has one (instrument), else the request's own headers.
func (p *Publisher) traceContext(r *http.Request) (traceParent, traceState string) {
	if p.tracer == nil || !trace.SpanContextFromContext(r.Context()).IsValid() {
		return r.Header.Get("Traceparent"), r.Header.Get("Tracestate")
	}
	var c tracing.TraceContext
	propagation.TraceContext{}.Inject(r.Context(), &c)
	return c.Parent, c.State
}

// annotate records the events of a request on its span: the event's id,
// type and source, or the size of a batch.
func annotate(r *http.Request, events []event.Event) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	if len(events) > 1 {
		span.SetAttributes(semconv.MessagingBatchMessageCount(len(events)))
		return
	}
	annotateEvent(r, events[0].ID(), events[0].Type())
}

// annotateEvent records the event of a request on its span: its id and
// type.
func annotateEvent(r *http.Request, id, eventType string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.CloudEventsEventID(id), semconv.CloudEventsEventType(eventType))
}
