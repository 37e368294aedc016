// Package stream is kfn's layout in NATS JetStream: the event stream and the
// dead-letter stream (their configuration, created or updated at start; an
// event stream made anew can be made closed, taking no event until it is
// opened, see ClosedSubjectPrefix), the
// subjects kfn uses besides the event subjects of the api package, and the
// durable pull consumer of each Subscription (its deterministic name and its
// configuration).
//
// Everything here is either a pure function of configuration and
// Subscription or a small idempotent call against JetStream, so that the
// Subscription reconciler, the dispatcher, the scaler and local mode agree on
// names without talking to each other.
package stream
