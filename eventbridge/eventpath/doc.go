// Package eventpath records the path of each event, for kfn dev's web view
// and kfn trace (Recorder), and per namespace for the event bridge of a
// cluster (Namespaces): stored in the event stream, delivered to which
// Subscriptions with which attempts and outcome, which events the function
// that received it emitted or replied with, where those went in turn, and
// replays from the dead-letter stream. Recent events only: a bounded
// number is kept.
//
// Events of one chain are linked through W3C trace context, which the
// publisher stores with each event and the runtime hosts pass on to the
// events a handler emits. TraceRoots gives an event published without
// trace context a new trace, and Transport gives each delivery attempt a
// span id of its own (a child of the event's context), so the traceparent
// an emitted event arrives with names the very attempt, and so the
// function and the event, it came from. Calls does the same for HTTP
// requests to functions through the gateway. Events whose origin is not known
// (published from outside, or emitted by a handler that started a span of
// its own) start a chain, grouped with the other events of their trace.
package eventpath
