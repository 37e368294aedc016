// Package otlp starts the event bridge's tracer provider: the
// OpenTelemetry SDK exporting spans over OTLP/HTTP when an endpoint is
// configured (the -trace-endpoint flag or the standard
// OTEL_EXPORTER_OTLP_* variables), a no-op provider otherwise. It is apart
// from package tracing so that what makes spans (publisher, dispatcher,
// kfn dev) does not carry the SDK and its exporter.
package otlp
