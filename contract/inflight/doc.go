// Package inflight is the contract of the gateway's in-flight request
// counts, carried from the event bridge to every scaler replica over core
// NATS (package internal/natsinflight): the subject ([DefaultSubject]),
// the message ([Report], [Encode], [Decode]) and its bounds, and the
// [Reporter] that receives decoded reports.
//
// A report that does not decode or is out of bounds is dropped and
// changes nothing. Whoever may publish on the subject may wake Functions
// up and scale them, so the subject is as trusted as the NATS account both
// sides share: in the chart only kfn's pods reach NATS (NetworkPolicies);
// with an external NATS, give publish permission on the subject to the
// event bridge's user only.
package inflight
