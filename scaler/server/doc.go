// Package server serves a [activity.Scaler] to KEDA over gRPC, as KEDA's
// external scaler protocol (externalscaler.proto) defines it, for trigger
// types external (polling) and external-push (polling plus StreamIsActive),
// with the gRPC health service, optional TLS and Prometheus metrics.
//
// A ScaledObject names its Function and targets in its trigger metadata (see
// package contract/trigger, the contract with the controller); the server reports two metrics per Function,
// [MetricBacklog] (events waiting, per replica target targetBacklog) and
// [MetricConcurrency] (requests in the gateway, per replica target
// targetConcurrency), so the HPA runs as many replicas as the larger of the
// two asks.
package server
