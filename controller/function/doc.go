// Package function reconciles serverless.kyma-project.io/v1alpha2 Functions
// into the objects that run them: a ConfigMap with the source, a Deployment,
// a Service and, when the Function is autoscaled, a CPU
// HorizontalPodAutoscaler or a KEDA ScaledObject; and it writes the
// Function's status as Kyma users know it.
//
// The desired objects are computed by pure builders, one file per child
// (configmap.go, deployment.go, service.go, hpa.go, scaledobject.go), from a
// [plan.Plan] and the controller's [Config]. The [Reconciler] applies them
// with server-side apply under one field manager, never setting
// spec.replicas on a Deployment an autoscaler owns, and computes the
// conditions as data (status.go) before writing the status once.
package function
