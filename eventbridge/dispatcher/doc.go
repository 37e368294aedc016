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
// This package is the dispatcher's API (Config, New, the Options, the
// Dispatcher's methods) over its parts, each a package of its own:
//   - schedule: per Subscription, a worker that pulls while the sink is
//     ready and within budget, and decides when each event is attempted
//     and what its verdict leads to (Upsert, Remove, Start).
//   - delivery: per event, one attempt (the request, the answer, the
//     reply and its bytes), its verdict and backoff, giving up.
//   - budget: each Subscription's backlog within its maxBacklog, and each
//     namespace's within its totals.
//   - keyorder: an ordered Subscription's events by partition key,
//     which may start (schedule's worker holds them in it).
//   - slots: the delivery slots, shared fairly among namespaces: one
//     namespace's fan-out, retries, large events or replies wait behind
//     its own work, not in front of another's.
//   - observe: what is recorded of each delivery: the Steps told to the
//     Observers added with WithObserver and counted for Counts, the
//     Prometheus metrics, the spans.
//
// The pulling is package pull's (one Puller for every Subscription), the
// stored forms of a dead letter and of a reply event are packages
// deadletter's and reply's.
//
// Where a sink is and whether it is ready are asked through two small
// interfaces, Resolver and Endpoints, so that the same dispatcher serves a
// cluster and local mode.
package dispatcher
