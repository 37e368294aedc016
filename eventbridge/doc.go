// Package bridge wires the event bridge into one process: NATS connection,
// streams, publisher, dispatcher, dead-letter admin API, metrics, and either
// the Subscription reconciler and dispatcher feeder against Kubernetes or a
// static set of Subscriptions from manifest files. Config holds every
// setting with working defaults; Run runs until its context ends.
package eventbridge
