// Package inflight carries the gateway's in-flight request counts from the
// event bridge to every scaler replica over core NATS: the gateway reports
// through a [Publisher] (a gateway.InFlightReporter) on one subject
// (default [DefaultSubject]), and each scaler replica [Subscribe]s to it
// (not in a queue group: every replica needs every count to answer KEDA
// and to push activation).
//
// A report is a small JSON document ([Report]); one that does not decode or
// is out of bounds is dropped with a log and changes nothing. Whoever may
// publish on the subject may wake Functions up and scale them, so the
// subject is as trusted as the NATS account both sides share: in the chart
// only kfn's pods reach NATS (NetworkPolicies); with an external NATS, give
// publish permission on the subject to the event bridge's user only.
package inflight
