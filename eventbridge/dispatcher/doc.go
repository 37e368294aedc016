// Package dispatcher delivers stored events to Subscription sinks: for each
// Subscription it pulls from the Subscription's durable JetStream consumer,
// POSTs each event to the sink as a binary-mode CloudEvent, and settles it:
// acknowledged on 2xx, redelivered with exponential backoff and jitter on
// 408, 429, 5xx and network errors (honouring Retry-After), dead-lettered
// with the reason after the last attempt or on any other status. A sink's
// CloudEvent reply is published as a new event, with a hop counter bounding
// loops. While a sink has no ready endpoint the dispatcher does not pull for
// it, so events wait in the stream, visible as backlog, and no attempt is
// spent.
//
// The deliveries of all Subscriptions take turns in the dispatcher's
// delivery slots, shared fairly among namespaces (share.go): one
// namespace's fan-out, retries, large events or replies wait behind its
// own work, not in front of another's.
//
// The pulling is package pull's (one Puller for every Subscription), the
// stored forms of a dead letter and of a reply event are packages
// deadletter's and reply's: this package decides, per event, what to do.
//
// Where a sink is and whether it is ready are asked through two small
// interfaces, Resolver and Endpoints, so that the same dispatcher serves a
// cluster and local mode. Every step of a delivery (an attempt and its
// outcome, an event given up) is counted for Counts, a typed view of the
// same numbers as the Prometheus counters, and told to the Observers added
// with WithObserver (observer.go).
package dispatcher
