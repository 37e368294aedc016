// Package eventbridge assembles kfn's event bridge from its parts (package
// publisher, dispatcher, gateway, deadletter, subscription and the
// Subscription reconciler): New builds them from a Config (the parts'
// settings, DefaultConfig) and Deps (what the host gives: the NATS
// connection, logs, metrics, and either a Kubernetes manager or static
// endpoints), Bridge.Handlers gives each listener's handler with its access
// rule, and Bridge.Run runs the parts. Every host builds its event bridge
// with New: Run, the event bridge as a process of its own (cmd/eventbridge,
// configured by Process), kfn dev (package local/dev) and the benchmarks,
// so that a part, a limit or a listener's access rule is added in one
// place.
package eventbridge
