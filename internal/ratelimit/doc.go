// Package ratelimit bounds how often each of many callers may do
// something: a token bucket per key (a namespace, say), all of one rate
// and burst, made when a key is first asked about and forgotten once it is
// full again (as a new one would be) when many are kept. The event bridge's
// publisher bounds each sender namespace's events with it, and the
// dependency cache each namespace's writer token reviews.
package ratelimit
