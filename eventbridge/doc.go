// Package eventbridge assembles kfn's event bridge from its parts (package
// publisher, dispatcher, gateway, deadletter, subscription and the
// Subscription reconciler): New builds them from a Config (the parts'
// settings, DefaultConfig), the NATS connection, an Environment (the world
// it runs in: Cluster, read from Kubernetes, or Static, given by the host)
// and Options (logs, metrics, spans, the listeners' access, kfn dev's
// hooks); Bridge.Handlers gives each listener's handler with its access
// rule, and Bridge.Run runs the parts. Every host builds its event bridge
// with New: Run, the event bridge as a process of its own (cmd/eventbridge,
// configured by Process), kfn dev (package local/dev) and the benchmarks,
// so that a part, a limit or a listener's access rule is added in one
// place.
package eventbridge
