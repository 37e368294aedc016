// Package pull is kfn's JetStream pull client: one Puller asks many
// durable consumers of a stream for messages over one subscription of a
// NATS connection, renews the requests whose end the server never told
// (its expiry is the requests' heartbeat) and asks again after a
// reconnect, keeps the messages it hands over within byte bounds (in
// total and per consumer), and pauses and resumes each consumer's pull
// (Pull) on its holder's word. Beside it, the two things a holder of
// pulled messages needs: a Heartbeat that keeps held messages in progress,
// and Goroutines that keep their stacks between deliveries.
//
// A Puller is the handle of its work, shaped like jetstream's
// ConsumeContext: Stop and Closed; each Pull hands its messages to a
// Handler, as Consume does to its MessageHandler, and a Msg's Run hands
// it on to the Handler's Handle on one of the Goroutines, with nothing
// allocated per message but the Msg. Its messages are Msg, a jetstream.Msg
// of this package's making: jetstream makes its own only for the
// subscriptions of its Consume, Messages and Fetch (see Msg), and one of
// those per consumer is what a Puller exists to avoid (see pull.go).
package pull
