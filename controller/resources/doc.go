// Package resources builds the Kubernetes objects that run a Function, as
// server-side apply configurations, from its [plan.Plan] and the
// controller's [Config]: the source ConfigMap, the Deployment, the
// Service, and, when an autoscaler of kfn's owns the replica count, a CPU
// HorizontalPodAutoscaler or a KEDA ScaledObject on kfn's scaler. One file
// per object; every builder is a pure function that performs no I/O, so
// each has a table test without a cluster. The reconciler (package
// controller/function) decides which objects a Function needs and applies
// them.
package resources
