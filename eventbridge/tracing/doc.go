// Package tracing is the event bridge's OpenTelemetry tracing setup: the
// W3C propagation it speaks (tracecontext and baggage), the attribute keys
// of its spans, and Start, which makes the tracer provider that exports
// spans over OTLP/HTTP when an endpoint is configured (a flag or the
// standard OTEL_EXPORTER_OTLP_* variables) and is a no-op otherwise. The
// spans themselves are made where the work happens: packages publisher
// and dispatcher.
package tracing
