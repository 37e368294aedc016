// Package faults is kfn's fault suite: events flow at a steady rate from
// the publisher through JetStream and the dispatcher to a real Node.js
// function, each part a real process of its own (nats-server built from
// its Go module, the eventbridge binary as publisher with the Subscription
// reconciler and as dispatcher, kfn's Node.js host), against a real API
// server that holds the Subscription, the function's Service and its
// EndpointSlice (the harness sets the endpoint's readiness as the kubelet
// would), while one fault strikes: the dispatcher killed with SIGKILL
// twice, NATS killed and restarted on its store, NATS stopped cleanly, the
// function killed, the function scaled to zero and back, the function too
// slow then fast again.
//
// The function records, per event, whether it answered or the dispatcher
// went away first (after its request timeout); only an answer counts as a
// delivery. Every test checks that each event the publisher acknowledged
// was answered at least once, that none was dead-lettered, and that the
// answers beyond the first stay within the test's documented bound: none
// where the fault cannot cut a delivery short (at zero and back: the
// dispatcher stops pulling and the host drains; slow then fast: a
// timed-out delivery is not an answer), at most the in-flight window
// (maxInFlightMessages) per kill, plus 100 ms of acknowledgements when NATS
// is killed. The flow sends every fourth event twice, as a client whose
// answer was lost does, so a broken de-duplication exceeds every bound.
// "At zero" also checks that no attempt failed while the function had no
// ready endpoint, and "slow then fast" that every event whose delivery
// timed out was delivered again.
package faults
