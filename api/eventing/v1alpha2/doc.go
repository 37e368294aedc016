// Package v1alpha2 is the eventing.kyma-project.io/v1alpha2 API: the
// Subscription resource, field for field compatible with Kyma Eventing, the
// documented delivery settings of spec.config, and the mapping of CloudEvent
// sources and types to JetStream subjects (Kyma's cleaning rules, standard
// and exact matching, and the legacy sap.kyma.custom event-type form).
//
// +kubebuilder:object:generate=true
// +groupName=eventing.kyma-project.io
package v1alpha2
