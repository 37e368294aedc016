package tracing

import (
	"net/http"
	"net/textproto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
)

// Propagator is the trace propagation of the event bridge: W3C trace
// context (traceparent, tracestate) and W3C baggage.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Attribute keys of kfn's spans beside OpenTelemetry's semantic
// conventions (cloudevents.*, http.*, messaging.*). The Subscription of a
// span is in its name ("deliver <namespace>/<subscription>").
const (
	// Attempt is the delivery attempt, from 1.
	Attempt = attribute.Key("kfn.attempt")
	// Outcome is what became of an attempt: delivered, retry, dead_letter
	// or discarded.
	Outcome = attribute.Key("kfn.delivery.outcome")
	// RetryDelay is the wait before the next attempt, in milliseconds.
	RetryDelay = attribute.Key("kfn.retry.delay_ms")
	// EventAge is how long the event had been stored when an attempt
	// started, in milliseconds: the wait before its first attempt, and
	// backoff and earlier attempts before a later one.
	EventAge = attribute.Key("kfn.event.age_ms")
	// Reason is why an event was given up.
	Reason = attribute.Key("kfn.dead_letter.reason")
	// Hops is the hop count of a reply event.
	Hops = attribute.Key("kfn.hops")
	// Result is what became of a sink's reply: published, invalid or hop_limit.
	Result = attribute.Key("kfn.reply.result")
)

// Outcomes of a delivery attempt (Outcome).
const (
	OutcomeDelivered  = "delivered"
	OutcomeRetry      = "retry"
	OutcomeDeadLetter = "dead_letter"
	OutcomeDiscarded  = "discarded"
)

// TraceContext receives the W3C trace context of a context without a map:
// Propagator.Inject(ctx, &tc) (or propagation.TraceContext{}.Inject) sets
// Parent and State, the traceparent and tracestate to store with an event.
type TraceContext struct {
	Parent, State string
}

var _ propagation.TextMapCarrier = (*TraceContext)(nil)

// Get returns nothing: a TraceContext is only written to.
func (*TraceContext) Get(string) string { return "" }

// Set keeps traceparent and tracestate, and ignores other keys (baggage is
// stored from the context, see eventstore.Store).
func (c *TraceContext) Set(key, value string) {
	switch key {
	case "traceparent":
		c.Parent = value
	case "tracestate":
		c.State = value
	}
}

// Keys returns nothing: a TraceContext is only written to.
func (*TraceContext) Keys() []string { return nil }

// The W3C header names as http.Header keeps them (canonical form).
const (
	canonicalTraceParent = "Traceparent"
	canonicalTraceState  = "Tracestate"
	canonicalBaggage     = "Baggage"
)

// HeaderCarrier is propagation.HeaderCarrier (the same reads and writes of
// an http.Header, Values included) that knows the canonical form of the
// W3C names the propagators ask for (traceparent, tracestate, baggage)
// instead of making it anew on every call: http.Header canonicalizes a
// lower-case key into a new string each time, two or three per request
// and one per delivery.
type HeaderCarrier http.Header

var (
	_ propagation.TextMapCarrier = HeaderCarrier(nil)
	_ propagation.ValuesGetter   = HeaderCarrier(nil)
)

// canonical is key's form in an http.Header.
func canonical(key string) string {
	switch key {
	case "traceparent":
		return canonicalTraceParent
	case "tracestate":
		return canonicalTraceState
	case "baggage":
		return canonicalBaggage
	}
	return textproto.CanonicalMIMEHeaderKey(key)
}

// Get returns the first value of key, "" when it has none.
func (c HeaderCarrier) Get(key string) string {
	if v := c[canonical(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns every value of key.
func (c HeaderCarrier) Values(key string) []string { return c[canonical(key)] }

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) { c[canonical(key)] = []string{value} }

// Keys returns the header's keys.
func (c HeaderCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }
