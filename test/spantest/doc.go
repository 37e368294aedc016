// Package spantest is, for tests of what makes spans (publisher,
// dispatcher), an OpenTelemetry SDK tracer provider that counts the spans
// started and says, as otlp.Provider does, whether it records a span
// whose parent was not sampled (tracing.SkipsUnsampled): so a test tells
// a span not started from one started and not recorded, which exporters
// cannot.
package spantest
