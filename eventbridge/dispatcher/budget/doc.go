// Package budget holds each Subscription's backlog (its consumer's
// pending plus unacknowledged events) within its maxBacklog and
// maxBacklogBytes, and each namespace's Subscriptions together within
// the namespace's totals and a fair part of the event stream: a
// Subscription's Backlog reads what waits, when its budget loop says it
// is due, and says how many of its oldest events are over (the excess),
// which its worker gives up. So one slow or dead sink, or one
// namespace's many, cannot fill the shared event stream and make
// publishing fail for every Subscription.
package budget
