package tracing

import "go.opentelemetry.io/otel/trace"

// This file lets the publisher and the dispatcher skip the spans of a trace
// that is not sampled. With a parent-based sampler (OpenTelemetry's
// default, and the parentbased_* values of OTEL_TRACES_SAMPLER) a span
// whose parent was not sampled is never recorded: reading the parent's
// context (about a microsecond), starting and ending spans nobody records
// and writing their context on (two more) would change nothing but the
// span id passed on, which names a span no backend has. One in ten traces
// sampled left the other nine paying most of what the tenth did.

// skipper is implemented by a tracer provider that says whether it
// records a span whose parent was not sampled (otlp.Provider does).
type skipper interface {
	// SkipsUnsampled reports whether no span whose parent was not
	// sampled is ever recorded.
	SkipsUnsampled() bool
}

// SkipsUnsampled reports whether tp records no span whose parent was not
// sampled, as tp says of itself; a provider that does not say (any but
// otlp.Provider) is taken to record them, and gets every span started.
func SkipsUnsampled(tp trace.TracerProvider) bool {
	s, ok := tp.(skipper)
	return ok && s.SkipsUnsampled()
}

// NotSampled reports whether traceParent is a W3C traceparent of version
// 00 (what kfn stores and OpenTelemetry writes: 55 characters, lower-case
// hex, trace and parent ids not zero, only the sampled and random flags)
// whose sampled flag is off. It reads only what it must, without
// allocating; any other value, valid or not, is false, and the
// propagator decides (Propagator.Extract) as for a sampled one.
func NotSampled(traceParent string) bool {
	const (
		length   = 55
		traceEnd = 35 // "00-" and 32 hex digits
		spanEnd  = 52 // then "-" and 16
	)
	if len(traceParent) != length || traceParent[0] != '0' || traceParent[1] != '0' ||
		traceParent[2] != '-' || traceParent[traceEnd] != '-' || traceParent[spanEnd] != '-' {
		return false
	}
	if !lowerHexNotZero(traceParent[3:traceEnd]) || !lowerHexNotZero(traceParent[traceEnd+1:spanEnd]) {
		return false
	}
	// The flags: 00 (random off) or 02 (random on); 01 and 03 are sampled,
	// and version 00 allows no other bit.
	return traceParent[53] == '0' && (traceParent[54] == '0' || traceParent[54] == '2')
}

// lowerHexNotZero reports whether s is lower-case hex digits, not all
// zero (an id of zeros is invalid).
func lowerHexNotZero(s string) bool {
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}
