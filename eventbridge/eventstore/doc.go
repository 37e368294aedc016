// Package eventstore is the stored form of a CloudEvent and the one way
// into a stream. An Event is an event as stored: its attributes as ce-*
// headers beside its data, its trace context, and what the event bridge
// records with it (sender, hop count, the source it is routed by). Encode
// makes one of a CloudEvent, EncodeBinary of a binary-mode request,
// Restore of a message stored before (a dead letter, a replayed event);
// Store.Put is the one entry point that stores an event, under its
// subject and de-duplication id, and says, with sentinel errors, why
// JetStream refused one. Attribute, RouteSource, Hops, CopyToHTTP,
// CopyToWire and Decode read a stored message back; only this package
// writes its headers.
package eventstore
