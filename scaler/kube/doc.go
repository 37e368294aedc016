// Package kube runs kfn's KEDA external scaler against a Kubernetes
// cluster, as one process: the scaler core fed with the cluster's
// Subscriptions (the event bridge's feed.Feeder; list and watch
// only, every replica on its own), its gRPC server for KEDA, the gateway's
// in-flight reports over NATS (package api/inflight), and /metrics,
// /healthz and /readyz. Config holds every setting with working defaults
// and RegisterFlags documents each one as a flag; Run runs until its
// context ends.
package kube
