package observe

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// This file holds the spans of a delivery (when Config.Tracer is set) and
// its latency and age histograms. The spans: for each delivery attempt a
// client span "deliver <namespace>/<subscription>", child of the trace
// context stored with the event (the publisher's span), whose context goes
// to the sink as traceparent (so the function's own span is its child),
// with the event's id, the attempt, the event's age (how long since it was
// stored: the wait before the first attempt, backoff and retries before a
// later one), the status code and the outcome (and, after a failure, the
// retry delay); "reply <namespace>/<subscription>" for a sink's reply event
// published (its stored trace context); and "dead-letter
// <namespace>/<subscription>" for an event given up, with the reason.
// Without a tracer no span is made and the stored trace context goes to
// the sink unchanged; so with a tracer that records no child of an
// unsampled parent (Config.SkipUnsampled) for an event whose stored
// trace context is not sampled: what would be started is never recorded.

// headerCarrier reads and writes the trace context of a stored event,
// whose header names are lower case as written (nats.Header does not
// canonicalize them).
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c headerCarrier) Set(key, value string) { c[key] = []string{value} }

func (c headerCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// eventContext returns ctx carrying the trace context stored with an event
// (traceparent, tracestate, baggage), when tracing is on; otherwise ctx.
func (rec *Record) eventContext(ctx context.Context, h nats.Header) context.Context {
	if rec.r.cfg.Tracer == nil {
		return ctx
	}
	return tracing.Propagator.Extract(ctx, headerCarrier(h))
}

// unsampled reports whether the event of stored headers h gets no span:
// tracing is off, or its stored trace context is not sampled and the
// provider records no child of it (Config.SkipUnsampled).
func (rec *Record) unsampled(h nats.Header) bool {
	return rec.r.cfg.Tracer == nil ||
		rec.r.cfg.SkipUnsampled && tracing.NotSampled(headerCarrier(h).Get(eventstore.HeaderTraceParent))
}

// withBaggage returns ctx carrying the baggage stored with an event,
// which a reply stored under ctx keeps (eventstore.Store.Put), when
// tracing is on and no span is made for it.
func (rec *Record) withBaggage(ctx context.Context, h nats.Header) context.Context {
	if rec.r.cfg.Tracer == nil {
		return ctx
	}
	return propagation.Baggage{}.Extract(ctx, headerCarrier(h))
}

// spanNames are the names of a Subscription's spans: what they do and the
// Subscription, "deliver default/orders". The Subscription is in the name,
// not in attributes: the SDK's cost grows with every attribute, and span
// names are what trace search starts from.
type spanNames struct{ deliver, reply, deadLetter string }

func newSpanNames(namespace, name string) spanNames {
	sub := " " + namespace + "/" + name
	return spanNames{deliver: "deliver" + sub, reply: "reply" + sub, deadLetter: "dead-letter" + sub}
}

// Attempt is one delivery attempt being recorded; the zero span (tracing
// off, or the trace not sampled) records only the histograms.
type Attempt struct {
	rec   *Record
	span  trace.Span // nil without a span
	start time.Time
	// What the sink answered and the retry's delay, set on the span when
	// it ends: one call for all (each call allocates).
	status   int
	errType  string
	reason   string
	retryIn  time.Duration
	retrying bool
}

// Start is when the attempt began.
func (a *Attempt) Start() time.Time { return a.start }

// clientSpan are the options of an attempt's span, made once: each option
// given in the call is a slice and an interface value allocated per span.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// StartAttempt begins recording an attempt: the delivery-latency clock,
// and, when tracing is on and the event's trace sampled, the attempt's
// span, child of the event's stored trace context, with the event's id,
// the attempt and the event's age (since it was stored). The returned ctx
// carries the attempt's span.
func (rec *Record) StartAttempt(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, attempts int) (context.Context, Attempt) {
	a := Attempt{rec: rec, start: time.Now()}
	h := msg.Headers()
	if rec.unsampled(h) {
		return rec.withBaggage(ctx, h), a
	}
	ctx, a.span = rec.r.cfg.Tracer.Start(rec.eventContext(ctx, h), rec.names.deliver, clientSpan...)
	if a.span.IsRecording() { // a trace not sampled costs no attributes
		age := int64(0)
		if !meta.Timestamp.IsZero() {
			age = max(a.start.Sub(meta.Timestamp), 0).Milliseconds()
		}
		a.span.SetAttributes(semconv.CloudEventsEventID(eventstore.Attribute(h, "id")), tracing.Attempt.Int(attempts), tracing.EventAge.Int64(age))
	}
	return ctx, a
}

// Inject writes the attempt's trace context (ctx's, from StartAttempt)
// into the request to the sink, over the stored one CopyToHTTP copied,
// when the attempt has a span.
func (rec *Record) Inject(ctx context.Context, h http.Header) {
	if rec.r.cfg.Tracer != nil && trace.SpanContextFromContext(ctx).IsValid() {
		tracing.Propagator.Inject(ctx, tracing.HeaderCarrier(h))
	}
}

// Answered records what the sink answered: the delivery latency, and, on
// the span when it ends, the status.
func (a *Attempt) Answered(res Answer) {
	a.rec.Count.DeliveryDuration.Observe(time.Since(a.start).Seconds())
	if a.span == nil {
		return
	}
	a.status = res.Status
	if !res.Delivered {
		a.errType = "network"
		if res.Status != 0 {
			a.errType = http.StatusText(res.Status)
		}
		a.reason = res.Reason
	}
}

// Delivered records a successful attempt: the event's age at its start.
func (a *Attempt) Delivered(stored time.Time) {
	if !stored.IsZero() {
		a.rec.Count.EventAge.Observe(max(a.start.Sub(stored), 0).Seconds())
	}
	a.End(tracing.OutcomeDelivered)
}

// Retry records a failed attempt to be retried after delay.
func (a *Attempt) Retry(delay time.Duration) {
	a.retryIn, a.retrying = delay, true
	a.End(tracing.OutcomeRetry)
}

// Failed records an attempt whose outcome is an error of the dispatcher's
// own (a reply it could not store), not the sink's answer.
func (a *Attempt) Failed(err error) {
	if a.span != nil {
		a.span.RecordError(err)
		a.span.SetStatus(codes.Error, err.Error())
	}
}

// End ends the span with what the attempt recorded and its outcome; the
// first call counts.
func (a *Attempt) End(outcome string) {
	if a.span == nil {
		return
	}
	if a.span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs, tracing.Outcome.String(outcome))
		if a.status != 0 {
			attrs = append(attrs, semconv.HTTPResponseStatusCode(a.status))
		}
		if a.errType != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(a.errType))
			a.span.SetStatus(codes.Error, a.reason)
		}
		if a.retrying {
			attrs = append(attrs, tracing.RetryDelay.Int64(a.retryIn.Milliseconds()))
		}
		a.span.SetAttributes(attrs...)
	}
	a.span.End()
	a.span = nil
}

// GiveUpOutcome is the outcome of an attempt after which the event is
// given up: dead-lettered, or discarded when dead-lettering (deadLetter)
// is off.
func GiveUpOutcome(deadLetter bool) string {
	if deadLetter {
		return tracing.OutcomeDeadLetter
	}
	return tracing.OutcomeDiscarded
}

// DeadLetterSpan starts the span of giving an event up, child of the
// attempt in ctx, or of the event's stored trace context when no attempt
// was made (the backlog budget). It returns nil when tracing is off.
func (rec *Record) DeadLetterSpan(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, status int, reason string) trace.Span {
	if rec.unsampled(msg.Headers()) {
		return nil
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = rec.eventContext(ctx, msg.Headers())
	}
	attrs := []attribute.KeyValue{
		semconv.CloudEventsEventID(eventstore.Attribute(msg.Headers(), "id")),
		tracing.Attempt.Int(int(meta.NumDelivered)),
		tracing.Reason.String(reason),
		semconv.MessagingDestinationName(rec.r.cfg.DeadLetterStream),
	}
	if status != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	}
	_, span := rec.r.cfg.Tracer.Start(ctx, rec.names.deadLetter, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return span
}

// ReplyContext starts the span of publishing a sink's reply, child of the
// attempt in ctx, and returns the trace context to store with the reply:
// the span's when it has one, else the answered event's (tracing off, or
// its trace not sampled). end records the reply's result and ends the
// span.
func (rec *Record) ReplyContext(ctx context.Context, h nats.Header, id, typ string, hops int) (tctx context.Context, traceParent, traceState string, end func(result string, err error)) {
	if rec.unsampled(h) {
		return ctx, headerCarrier(h).Get(eventstore.HeaderTraceParent), headerCarrier(h).Get(eventstore.HeaderTraceState), func(string, error) {}
	}
	ctx, span := rec.r.cfg.Tracer.Start(ctx, rec.names.reply, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.CloudEventsEventID(id), semconv.CloudEventsEventType(typ), tracing.Hops.Int(hops)))
	var tc tracing.TraceContext
	propagation.TraceContext{}.Inject(ctx, &tc)
	return ctx, tc.Parent, tc.State, func(result string, err error) {
		span.SetAttributes(tracing.Result.String(result))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
