// Package eventstore is the stored form of a CloudEvent: how an event
// becomes a JetStream message (its subject, its de-duplication id, its
// attributes as ce-* headers beside the data, the trace context) and back,
// and the one Store that writes events into the event stream and says, with
// sentinel errors, why JetStream refused one.
package eventstore
