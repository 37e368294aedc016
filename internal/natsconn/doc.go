// Package natsconn connects kfn's servers (the event bridge and the scaler)
// to NATS the one way they all do: never giving up, reconnecting forever,
// and saying so in their logs.
package natsconn
