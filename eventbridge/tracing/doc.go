// Package tracing holds the conventions of the event bridge's
// OpenTelemetry spans: the W3C propagation it speaks (tracecontext and
// baggage) and the attribute keys and outcomes its spans carry beside the
// semantic conventions. The spans are made where the work happens
// (packages publisher and dispatcher); package otlp makes the tracer
// provider that exports them.
package tracing
