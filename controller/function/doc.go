// Package function reconciles serverless.kyma-project.io/v1alpha2 Functions
// into the objects that run them: a ConfigMap with the source, a Deployment,
// a Service and, when the Function is autoscaled, a CPU
// HorizontalPodAutoscaler or a KEDA ScaledObject; and it writes the
// Function's status as Kyma users know it.
//
// A reconcile configures the Function (validates it, resolves a Git
// reference, computes its [plan.Plan] and chooses who owns its replicas),
// then applies the children that package controller/resources builds from
// the plan and the controller's [Config] (apply.go), with server-side apply
// under one field manager, never setting spec.replicas on a Deployment an
// autoscaler owns; it computes the conditions as data (status.go) and
// writes the status once.
package function
