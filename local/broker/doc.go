// Package broker runs the NATS JetStream server of `kfn dev` inside the kfn
// process, with its store in a directory of the project, so events that
// wait in a stream survive a restart of `kfn dev`.
package broker
