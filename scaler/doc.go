// Package scaler runs kfn's KEDA external scaler as one process, against a
// Kubernetes cluster: the activity core (package scaler/activity) fed with
// the cluster's Subscriptions (api/feed's Feeder; list and watch only,
// every replica on its own), its gRPC server for KEDA (package
// scaler/server), the gateway's in-flight reports over NATS (package
// api/inflight), and /metrics, /healthz and /readyz. Process holds every
// setting with working defaults (DefaultProcess) and RegisterFlags
// documents each one as a flag; Run runs until its context ends. It is
// named as the other components' processes are: eventbridge.Run and
// controller.Run, each beside its DefaultProcess.
package scaler
