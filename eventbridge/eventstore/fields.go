package eventstore

import (
	"cmp"
	"strconv"
)

// Attribute returns a CloudEvents attribute or extension of the event, ""
// when absent.
func (e *Event) Attribute(name string) string { return Attribute(e.h, name) }

// Extension returns an extension (or attribute) of the event, and whether
// the event has it.
func (e *Event) Extension(name string) (string, bool) {
	if v := e.h[HeaderPrefix+name]; len(v) > 0 {
		return v[0], true
	}
	return "", false
}

// SetType sets the event's type, the one it is stored and routed with.
func (e *Event) SetType(eventType string) { e.set(HeaderPrefix+"type", eventType) }

// SetOriginalType records the type the event was published with
// (OriginalTypeExtension).
func (e *Event) SetOriginalType(eventType string) {
	e.set(HeaderPrefix+OriginalTypeExtension, eventType)
}

// SetSender records the namespace that sent the event (SenderExtension).
func (e *Event) SetSender(namespace string) { e.set(HeaderPrefix+SenderExtension, namespace) }

// SetHops sets the event's hop count (HopsExtension).
func (e *Event) SetHops(n int) { e.set(HeaderPrefix+HopsExtension, strconv.Itoa(n)) }

// SetRoute routes the event by source rather than by its own source: Put
// stores it under the subject kyma.<clean source>.<clean type> and source
// in the HeaderRouteSource header, which Subscriptions are matched with
// and which is not delivered. The event keeps its source. "", or the
// event's own source, routes it by its own.
func (e *Event) SetRoute(source string) { e.route = source }

// RouteSource returns the source the event is routed by: SetRoute's, else
// its own.
func (e *Event) RouteSource() string { return cmp.Or(e.route, e.Attribute("source")) }

// TraceContext returns the W3C trace context stored with the event, ""
// for what it has none of.
func (e *Event) TraceContext() (traceParent, traceState string) {
	return first(e.h, HeaderTraceParent), first(e.h, HeaderTraceState)
}

// SetTraceContext replaces the W3C trace context stored with the event;
// an empty traceState removes the stored one.
func (e *Event) SetTraceContext(traceParent, traceState string) {
	e.set(HeaderTraceParent, traceParent)
	if traceState == "" {
		delete(e.h, HeaderTraceState)
		return
	}
	e.set(HeaderTraceState, traceState)
}

// Check checks the event's attributes against their bounds
// (CheckAttributes), as Put does: for a request whose events are all to
// be checked before any is stored.
func (e *Event) Check() error { return CheckAttributes(e.h) }

func (e *Event) set(key, value string) { e.h[key] = []string{value} }

// Size is about the bytes the event takes in the store: its data and its
// attributes' names and values.
func (e *Event) Size() int64 {
	n := len(e.data)
	for k, vs := range e.h {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}
