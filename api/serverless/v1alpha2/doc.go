// Package v1alpha2 is the serverless.kyma-project.io/v1alpha2 API: the
// Function resource, field for field compatible with Kyma Serverless, plus
// kfn's optional additions (scale-to-zero and queue-depth scaling knobs under
// spec.scaleConfig). Static rules live as kubebuilder markers that become
// OpenAPI and CEL rules in the generated CRD; rules that need more than the
// object itself are Go functions here.
//
// +kubebuilder:object:generate=true
// +groupName=serverless.kyma-project.io
package v1alpha2
