// Package activity knows, for every Function, how many events wait for it and
// whether it has work at all, and tells its watchers the moment a Function
// with no work gets some.
//
// It is the core of kfn's KEDA external scaler (package scaler/server serves
// it over gRPC) and has no Kubernetes dependency: whoever runs it feeds it
// Subscriptions ([Scaler.Upsert], [Scaler.Remove]: the Scaler is one of
// the event bridge's feed.Targets) and gateway in-flight counts
// ([Scaler.ReportInFlight]). In a cluster package scaler feeds it through a
// feed.Feeder; kfn dev feeds it the manifests on disk through a
// subscription.Set.
//
// # Backlog
//
// The backlog of a Function is the sum, over the JetStream consumers of every
// Subscription whose sink is the Function's Service, of num_pending +
// num_ack_pending, as JetStream's consumer API reports them. One refresh loop
// ([Scaler.Run]) reads every consumer of the event stream at once
// ([BacklogReader]) and every question is answered from memory. A Function
// one of whose consumers is missing, or whose backlog could not be read, has
// an error instead of a number, so that KEDA's fallback applies; it never
// gets a made-up number.
//
// # Active and inactive
//
// A Function is active when it has work:
//
//   - the last refresh found a backlog > 0, or
//   - the gateway reports requests in flight for it now, or
//   - an activation signal (a message on one of its Subscriptions' subjects,
//     or in-flight requests reported while it was inactive) arrived later
//     than the start of the last refresh minus the activation hold.
//
// Otherwise it is inactive. Only a refresh turns a Function inactive (one
// that read its backlog without error); a signal or a refresh turns it
// active. The hold ([WithActivationHold]) covers the short time between a
// message being seen on its subject and JetStream counting it, so that a
// refresh racing a first event does not flap the Function back to inactive.
//
// Each inactive->active transition is announced once to every watcher
// ([Scaler.Watch]); there is never an announcement without a transition, so a
// busy Function does not postpone KEDA's cool-down. While a Function is
// inactive the scaler listens ([Listener]) on the core NATS subjects of its
// Subscriptions' consumers, so the first event published for an idle
// Function activates it within milliseconds, without waiting for a refresh.
// Each such subscription ends after one message, so a busy Function costs
// the scaler nothing per event. An event published in the instant between a
// refresh finding a Function inactive and its listener being in place is
// found by the next refresh instead.
//
// Listening is bounded, as each subject is a NATS subscription of the
// scaler's and a tenant writes the subjects: a Function one of whose
// consumers is missing (a Subscription past its namespace's consumer
// limit) can be delivered nothing and is not listened for, until a refresh
// finds the consumer; and the subjects listened on are bounded per
// namespace and in total ([WithListenBounds]). A Function past a bound is
// woken by the refresh only, a refresh interval later.
package activity
