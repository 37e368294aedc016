// Package streamloss notices that NATS lost one of kfn's streams, and says
// so, instead of letting the event bridge make it anew as if nothing had
// happened.
//
// A stream is lost when NATS no longer has the stream it had: it is
// missing (a NATS server that lost its volume, a single-copy stream whose
// only server came back empty), or it is there but is not the one seen
// before: created at another time, or with a last sequence below one
// already seen (sequences of a stream never go back; a stream whose events
// were all acknowledged keeps its last sequence). An empty stream whose
// events were delivered is not a loss.
//
// A [Guard] remembers each stream's creation time and the highest last
// sequence it has seen, from its first look on. Each loss is counted in
// kfn_eventbridge_streams_lost_total{stream,reason} (reason "missing" or
// "recreated"), logged as an error, and reported once: a missing stream is
// forgotten, and when it comes back (made by this event bridge or another
// replica) it is the new baseline. The knowledge is the process's own: an
// event bridge that starts after the loss has nothing to compare with; the
// Subscriptions' "Events kept" condition, which their status carries
// across restarts, still tells their consumers were lost.
package streamloss
