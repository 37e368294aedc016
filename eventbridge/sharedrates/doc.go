// Package sharedrates makes the event bridge replicas' bounds of each
// namespace's events and bytes a second (admission.Rates) one bound for
// all of them: every interval, each replica publishes on one core NATS
// subject what each namespace took from its buckets since the last time
// (a Report), and takes what the other replicas report from its own
// (admission.Rates.Debit). A namespace whose clients reach two replicas
// then stores its rate, not twice it, up to what each replica took
// before it heard of the others' (an interval's worth and a burst each).
//
// Only the event bridge's NATS user may publish and subscribe on the
// subject (the chart's NATS permissions). A report that does not decode,
// or holds counts no replica can have taken, is dropped with a warning.
package sharedrates
