// Package delivery makes one delivery attempt of one event and settles
// it: it POSTs the event to its sink as a binary-mode CloudEvent
// (following 307 and 308 to the same origin only), reads the sink's
// answer and its CloudEvent reply (counted against the event's held
// bytes), judges the answer (Judge: done, retry, give up), computes the
// backoff of the next attempt (RedeliveryDelay, Retry-After) and holds
// the event until then (Retries), stores a reply as a new event, and
// gives an event up: dead-lettered with the reason, or discarded. When an
// event is attempted, and what a verdict leads to, is its Subscription's
// worker's (package schedule).
package delivery
