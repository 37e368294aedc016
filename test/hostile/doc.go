// Package hostile is, for tests and benchmarks, what a hostile tenant of a
// shared kfn does: the publish requests that once stopped or flooded the
// event bridge (each with the answer it must get), and a namespace of
// Functions and Subscriptions that turn the event bridge against others
// (a redirect to another tenant's or kfn's own address, a sink that never
// answers with large events, one that always fails, replies that NATS
// would close the connection for, a reply forged as the victim's, an
// emitting loop, a megabyte of answer headers, more Subscriptions on one
// type than a namespace may have), beside a victim tenant whose events
// must all arrive. The same attacks run in kfn dev, on the real node and
// in make bench.
package hostile
