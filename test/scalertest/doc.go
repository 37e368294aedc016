// Package scalertest runs what the scaler needs in tests and benchmarks: a
// real NATS server with JetStream embedded in the test process (random port,
// temporary store), kfn's streams, and the durable consumer of a
// Subscription, created as the event bridge creates it.
package scalertest
