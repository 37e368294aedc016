package dispatcher

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

// This file holds what the dispatcher records about a delivery beside
// doing it: the spans of its attempts (when a tracer provider is given)
// and the latency and age histograms.

// WithTracerProvider makes the dispatcher record spans with tp: for each
// delivery attempt a client span "deliver <namespace>/<subscription>",
// child of the trace context stored with the event (the publisher's
// span), whose context goes to the sink as traceparent (so the function's
// own span is its child), with the event's id, the attempt, the status
// code and the outcome (and, after a failure, the retry delay); on an
// event's first attempt a span "wait <namespace>/<subscription>" from the
// moment it was stored to the attempt; "reply <namespace>/<subscription>"
// for a sink's reply event published (its stored trace context); and
// "dead-letter <namespace>/<subscription>" for an event given up, with the
// reason. Without it no span is made and the stored trace context goes to
// the sink unchanged.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(d *Dispatcher) error {
		if tp != nil {
			d.tracer = tp.Tracer("github.com/kfn-dev/kfn/eventbridge/dispatcher")
		}
		return nil
	}
}

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
func (w *worker) eventContext(ctx context.Context, h nats.Header) context.Context {
	if w.d.tracer == nil {
		return ctx
	}
	return tracing.Propagator.Extract(ctx, headerCarrier(h))
}

// spanNames are the names of a worker's spans: what they do and the
// Subscription, "deliver default/orders". The Subscription is in the name,
// not in attributes: the SDK's cost grows with every attribute, and span
// names are what trace search starts from.
type spanNames struct{ wait, deliver, reply, deadLetter string }

func newSpanNames(namespace, name string) spanNames {
	sub := " " + namespace + "/" + name
	return spanNames{wait: "wait" + sub, deliver: "deliver" + sub, reply: "reply" + sub, deadLetter: "dead-letter" + sub}
}

// attempt is one delivery attempt being recorded; the zero span (tracing
// off) records only the histograms.
type attempt struct {
	w     *worker
	span  trace.Span // nil when tracing is off
	start time.Time
}

// clientSpan are the options of an attempt's span, made once: each option
// given in the call is a slice and an interface value allocated per span.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// startAttempt begins recording an attempt: the delivery-latency clock,
// and, when tracing is on, the attempt's span, child of the event's stored
// trace context, preceded on the first attempt by the span of the time the
// event waited since it was stored. The returned ctx carries the attempt's
// span.
func (w *worker) startAttempt(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, attempts int) (context.Context, attempt) {
	a := attempt{w: w, start: time.Now()}
	if w.d.tracer == nil {
		return ctx, a
	}
	h := msg.Headers()
	parent := w.eventContext(ctx, h)
	if attempts == 1 && !meta.Timestamp.IsZero() && meta.Timestamp.Before(a.start) {
		_, wait := w.d.tracer.Start(parent, w.names.wait, trace.WithTimestamp(meta.Timestamp))
		if wait.IsRecording() {
			wait.End(trace.WithTimestamp(a.start))
		} else {
			wait.End() // a span not recorded has no end time to give
		}
	}
	ctx, a.span = w.d.tracer.Start(parent, w.names.deliver, clientSpan...)
	if a.span.IsRecording() { // a trace not sampled costs no attributes
		a.span.SetAttributes(semconv.CloudEventsEventID(eventstore.Attribute(h, "id")), tracing.Attempt.Int(attempts))
	}
	return ctx, a
}

// inject writes the attempt's trace context into the request to the sink
// (over the stored one CopyToHTTP copied), when tracing is on.
func (w *worker) inject(ctx context.Context, h http.Header) {
	if w.d.tracer != nil {
		tracing.Propagator.Inject(ctx, tracing.HeaderCarrier(h))
	}
}

// answered records what the sink answered: the delivery latency, and the
// status on the span.
func (a *attempt) answered(res result) {
	a.w.count.deliveryDuration.Observe(time.Since(a.start).Seconds())
	if a.span == nil || !a.span.IsRecording() {
		return
	}
	if res.status != 0 {
		a.span.SetAttributes(semconv.HTTPResponseStatusCode(res.status))
	}
	if res.verdict != Done {
		errType := "network"
		if res.status != 0 {
			errType = http.StatusText(res.status)
		}
		a.span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		a.span.SetStatus(codes.Error, res.reason())
	}
}

// delivered records a successful attempt: the event's age at its start.
func (a *attempt) delivered(stored time.Time) {
	if !stored.IsZero() {
		a.w.count.eventAge.Observe(max(a.start.Sub(stored), 0).Seconds())
	}
	a.end(tracing.OutcomeDelivered)
}

// retry records a failed attempt to be retried after delay.
func (a *attempt) retry(delay time.Duration) {
	if a.span != nil && a.span.IsRecording() {
		a.span.SetAttributes(tracing.RetryDelay.Int64(delay.Milliseconds()))
	}
	a.end(tracing.OutcomeRetry)
}

// failed records an attempt whose outcome is an error of the dispatcher's
// own (a reply it could not store), not the sink's answer.
func (a *attempt) failed(err error) {
	if a.span != nil {
		a.span.RecordError(err)
		a.span.SetStatus(codes.Error, err.Error())
	}
}

// end ends the span with the attempt's outcome; the first call counts.
func (a *attempt) end(outcome string) {
	if a.span == nil {
		return
	}
	if a.span.IsRecording() {
		a.span.SetAttributes(tracing.Outcome.String(outcome))
	}
	a.span.End()
	a.span = nil
}

// giveUpOutcome is the outcome of an attempt after which the event is
// given up: dead-lettered, or discarded when dead-lettering is off.
func (w *worker) giveUpOutcome() string {
	if w.target.delivery.DeadLetter {
		return tracing.OutcomeDeadLetter
	}
	return tracing.OutcomeDiscarded
}

// deadLetterSpan starts the span of giving an event up, child of the
// attempt in ctx, or of the event's stored trace context when no attempt
// was made (the backlog budget). It returns nil when tracing is off.
func (w *worker) deadLetterSpan(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, status int, reason string) trace.Span {
	if w.d.tracer == nil {
		return nil
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = w.eventContext(ctx, msg.Headers())
	}
	attrs := []attribute.KeyValue{
		semconv.CloudEventsEventID(eventstore.Attribute(msg.Headers(), "id")),
		tracing.Attempt.Int(int(meta.NumDelivered)),
		tracing.Reason.String(reason),
		semconv.MessagingDestinationName(w.d.cfg.Streams.DeadLetterStream),
	}
	if status != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	}
	_, span := w.d.tracer.Start(ctx, w.names.deadLetter, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return span
}

// replyContext starts the span of publishing a sink's reply, child of the
// attempt in ctx, and returns the trace context to store with the reply:
// the span's when tracing is on, else the answered event's. end records
// the reply's result and ends the span.
func (w *worker) replyContext(ctx context.Context, h nats.Header, id, typ string, hops int) (tctx context.Context, traceParent, traceState string, end func(result string, err error)) {
	if w.d.tracer == nil {
		return ctx, headerCarrier(h).Get(eventstore.HeaderTraceParent), headerCarrier(h).Get(eventstore.HeaderTraceState), func(string, error) {}
	}
	ctx, span := w.d.tracer.Start(ctx, w.names.reply, trace.WithSpanKind(trace.SpanKindProducer),
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
