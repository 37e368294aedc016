// Package keyorder keeps the events of an ordered Subscription (ordering
// partitionkey) in order per key while events of different keys run in
// parallel: an Order is told each event as it arrives (Add), with its key
// and its stream sequence, and answers which events may start; an event
// starts once every event of its key with a lower sequence it holds has
// been settled (Done), at most a bound of them at once, and only while
// the Order is open: its holder closes it whenever events it did not see
// may still be handed out to it (a new session of its consumer), and opens
// it once the consumer's events in flight are all in its hands (see
// Order.Open). It does no I/O: the dispatcher's worker (package schedule)
// pulls, delivers and asks JetStream.
package keyorder
