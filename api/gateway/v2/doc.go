// Package v2 is the gateway.kyma-project.io/v2 API: the APIRule resource,
// field for field compatible with Kyma's API Gateway, which exposes a
// Service (a Function's, or any of the namespace) outside the cluster on
// a host, with ordered rules of path pattern, methods and one access
// strategy each (noAuth, jwt or extAuth), CORS, timeouts and request
// header and cookie changes. Kyma's v2alpha1 has the same schema: the CRD
// serves it beside v2 (hack/crdversions). kfn's gateway serves APIRules
// itself (Kyma needs Istio and its API Gateway module for them).
//
// +kubebuilder:object:generate=true
// +groupName=gateway.kyma-project.io
package v2
