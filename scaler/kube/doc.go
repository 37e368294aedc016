// Package kube feeds the scaler core from the Kubernetes API: it watches
// Subscriptions in every namespace (with controller-runtime) and tells the
// core the Binding of each valid one (scaler.BindingFor), and forgets the
// ones that are deleted or become invalid. It needs list and watch on
// subscriptions.eventing.kyma-project.io and nothing else.
package kube
