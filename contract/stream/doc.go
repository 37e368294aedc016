// Package stream is kfn's layout in NATS JetStream, as data: the names and
// bounds of the event stream, the dead-letter stream and the buckets
// ([Config], its defaults and validation), the subjects kfn uses besides
// the event subjects of the api package (replay, dead letters, the subject
// of a closed event stream), and the durable consumer of each
// Subscription (its deterministic name, [ConsumerName], and the settings
// that are not in the Subscription).
//
// Everything here is a pure function of configuration and Subscription, so
// that the Subscription reconciler, the dispatcher, the scaler and local
// mode agree on names without talking to each other. Package
// internal/jsstream makes this layout in JetStream.
package stream
