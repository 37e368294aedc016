// Package replay routes events replayed from the dead-letter queue to the
// one Subscription they came from, without slowing its consumer down the
// rest of the time.
//
// A replayed event is published on the consumer's own replay subject
// (stream.ReplaySubject), which no other consumer filters on. Keeping that
// subject in every consumer's filter would be simplest, but a JetStream
// consumer with more than one filter subject looks for its next message by
// walking the stream message by message, where a consumer with one
// subject jumps through the stream's per-subject index: with many
// Subscriptions of different types, each consumer walks past every other
// Subscription's events. So the replay subject is in a consumer's filter
// only from the first replay until its replayed events are all settled.
//
// Three things change a consumer's filter: a replay adds the subject
// (Filters.Hold), applying a Subscription writes the rest of the
// configuration and keeps the subject if it is there (Filters.Apply), and
// a sweep removes it once no replayed event waits (Filters.Sweep). Each
// does so under the consumer's lock, a key in the event stream's lock
// bucket (stream.Config.LockBucket) that expires after stream.LockTTL, so
// that they work the same from several processes. The lock matters: a
// replayed event published while the subject is not in the filter is
// dropped by the interest-retention stream, and so is one waiting when the
// subject is taken out.
package replay
