// Package deadletter is the dead-letter queue: the stored form of an event
// that ran out of delivery attempts (the event as it was, plus the
// Subscription, the last status and error, and the number of attempts), and
// the admin HTTP API that lists dead letters and replays them to the
// Subscription they came from, and only to it.
package deadletter
