// Package keda is kfn's end-to-end test with the real KEDA: KEDA's own
// ScaledObject reconciler and scale handler (github.com/kedacore/keda/v2,
// run in-process) against a real API server, with kfn's Function
// controller writing the ScaledObject and kfn's scaler serving it from an
// embedded NATS JetStream. It is a module of its own so that KEDA's
// controller dependencies (every scaler's cloud SDK) stay out of kfn's
// main module.
package keda
