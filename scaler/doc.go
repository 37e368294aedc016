// Package scaler assembles kfn's KEDA external scaler: NewParts makes its
// parts wherever they run, the activity core (package scaler/activity)
// and its gRPC server for KEDA (package scaler/server), and Parts.Run runs
// them; the scaler's process (Run) and kfn dev (package local/dev) both
// make them there. Run runs the scaler as one process against a
// Kubernetes cluster: the parts fed with the cluster's Subscriptions
// (internal/feed's Feeder; list and watch only, every replica on its own) and
// the gateway's in-flight reports over NATS (package contract/inflight), and
// /metrics, /healthz and /readyz. Process holds every setting with working
// defaults (DefaultProcess) and RegisterFlags documents each one as a
// flag; Run runs until its context ends. It is named as the other
// components' processes are: eventbridge.Run and controller.Run, each
// beside its DefaultProcess.
package scaler
