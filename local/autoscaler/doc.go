// Package autoscaler is `kfn dev`'s stand-in for KEDA and the HPA: a gRPC
// client of kfn's external scaler that calls StreamIsActive, IsActive,
// GetMetricSpec and GetMetrics exactly as KEDA does, and scales local
// process pools with the HPA's formula, from zero and back to zero.
package autoscaler
