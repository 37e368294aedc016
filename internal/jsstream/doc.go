// Package jsstream makes kfn's stream layout (package contract/stream) in
// NATS JetStream: the JetStream configuration of the event stream, the
// dead-letter stream, the lock bucket and the dependency bucket; Ensure
// and EnsureClosed, which create or update them at start; Open, which
// opens an event stream made closed; and each Subscription's durable pull
// consumer (ConsumerConfig, EnsureConsumer, DeleteConsumer).
//
// Every call is small and idempotent, and safe from several replicas at
// once, so that the Subscription reconciler, the dispatcher, the scaler
// and local mode can each make what they need without talking to each
// other.
package jsstream
