package eventpath

import (
	"context"
	crand "crypto/rand"
	"net/http"
	"slices"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// traceContext reads and writes W3C traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// spanContext parses a traceparent (and tracestate); the result is invalid
// when traceParent is empty or malformed.
func spanContext(traceParent, traceState string) trace.SpanContext {
	if traceParent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": traceParent}
	if traceState != "" {
		carrier["tracestate"] = traceState
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), carrier))
}

// format writes sc as traceparent and tracestate.
func format(sc trace.SpanContext) (traceParent, traceState string) {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), carrier)
	return carrier["traceparent"], carrier["tracestate"]
}

// newSpanID returns a random, valid span id.
func newSpanID() (id trace.SpanID) { randomID(id[:]); return id }

// newTraceID returns a random, valid trace id.
func newTraceID() (id trace.TraceID) { randomID(id[:]); return id }

// randomID fills id with random bytes, not all zero (the one invalid span
// or trace id).
func randomID(id []byte) {
	for !slices.ContainsFunc(id, func(b byte) bool { return b != 0 }) {
		_, _ = crand.Read(id) // never fails (crypto/rand)
	}
}

// traceRoots is the event store of TraceRoots.
type traceRoots struct {
	next publisher.EventStore
}

var _ publisher.EventStore = traceRoots{}

// TraceRoots wraps the publisher's event store: an event published without
// a valid traceparent is stored with a new one, the root of a new trace
// (not sampled: nothing recorded a span for it), as a tracing server does
// for a request without trace context. The functions it reaches then pass
// that trace on to the events they emit. Events with trace context are
// stored as they come.
func TraceRoots(next publisher.EventStore) publisher.EventStore {
	return traceRoots{next: next}
}

// Put implements publisher.EventStore: the stored form's trace context is
// replaced by a new root when it is not valid; an event's own traceparent
// extension, which Encode stores instead of the request's, is kept as it
// is.
func (s traceRoots) Put(ctx context.Context, e eventstore.Event) (eventstore.Result, error) {
	if e.Attribute(eventstore.HeaderTraceParent) == "" {
		e.SetTraceContext(rootIfNone(e.TraceContext()))
	}
	return s.next.Put(ctx, e)
}

func rootIfNone(traceParent, traceState string) (string, string) {
	if spanContext(traceParent, traceState).IsValid() {
		return traceParent, traceState
	}
	tp, _ := format(trace.NewSpanContext(trace.SpanContextConfig{TraceID: newTraceID(), SpanID: newSpanID()}))
	return tp, ""
}

// FunctionAt names the function ("namespace/name") whose process listens on
// host (host:port of a delivery's URL); false when none does.
type FunctionAt func(host string) (string, bool)

// transport is the RoundTripper of Transport.
type transport struct {
	r          *Recorder
	next       http.RoundTripper
	functionAt FunctionAt
}

// Transport wraps the RoundTripper of the dispatcher's HTTP client: each
// delivery attempt of an event with a valid traceparent is sent with a new
// span id, a child of the event's (trace id, flags and tracestate kept),
// and the Recorder notes which event went to which function under that span
// id. An event a function emits while handling the attempt carries that
// span id as its parent, which links it to the delivery. Requests without
// trace context pass unchanged.
func (r *Recorder) Transport(next http.RoundTripper, functionAt FunctionAt) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{r: r, next: next, functionAt: functionAt}
}

// RoundTrip implements http.RoundTripper. It does not modify req: the
// attempt goes out as a clone with its own traceparent.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	sc := spanContext(req.Header.Get("Traceparent"), req.Header.Get("Tracestate"))
	if !sc.IsValid() {
		return t.next.RoundTrip(req)
	}
	attempt := sc.WithSpanID(newSpanID())
	out := req.Clone(req.Context())
	setTraceContext(out.Header, attempt)
	fn := ""
	if t.functionAt != nil {
		fn, _ = t.functionAt(req.URL.Host)
	}
	t.r.attempted(attempt.SpanID(), attemptSpan{event: ref{source: req.Header.Get("Ce-Source"), id: req.Header.Get("Ce-Id")}, function: fn})
	return t.next.RoundTrip(out)
}

// setTraceContext sets the traceparent and tracestate of sc in h.
func setTraceContext(h http.Header, sc trace.SpanContext) {
	tp, ts := format(sc)
	h.Set("Traceparent", tp)
	h.Del("Tracestate")
	if ts != "" {
		h.Set("Tracestate", ts)
	}
}

// Route names the function ("namespace/name") an HTTP request is for; false
// when it names none.
type Route func(r *http.Request) (function string, ok bool)

// Calls wraps kfn dev's gateway: each HTTP request for a function goes on
// with a span id of its own, a child of the request's trace context or the
// root of a new trace (not sampled), and the Recorder notes the function
// and the request under it. An event the function emits while handling
// the request carries that span id, so it shows as emitted by the function
// for that request. Requests for no function pass unchanged.
func (r *Recorder) Calls(next http.Handler, route Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fn, ok := route(req)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		sc := spanContext(req.Header.Get("Traceparent"), req.Header.Get("Tracestate"))
		if sc.IsValid() {
			sc = sc.WithSpanID(newSpanID())
		} else {
			sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: newTraceID(), SpanID: newSpanID()})
		}
		out := req.Clone(req.Context())
		setTraceContext(out.Header, sc)
		r.attempted(sc.SpanID(), attemptSpan{function: fn, request: req.Method + " " + req.URL.Path})
		next.ServeHTTP(w, out)
	})
}
