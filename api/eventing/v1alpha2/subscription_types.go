package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TypeMatching is how a Subscription's types are matched against events.
// +kubebuilder:validation:Enum=standard;exact
type TypeMatching string

// The type matching modes.
const (
	// TypeMatchingStandard cleans source and types and matches both.
	TypeMatchingStandard TypeMatching = "standard"
	// TypeMatchingExact compares each type, as written, with an event's
	// <clean source>.<clean type> (Kyma's stored form), or with its type
	// alone for a legacy (sap.kyma.custom) type.
	TypeMatchingExact TypeMatching = "exact"
)

// SubscriptionSpec is the desired state of a Subscription.
//
// +kubebuilder:validation:XValidation:rule="(has(self.typeMatching) && self.typeMatching == 'exact') || (has(self.source) && self.source.size() > 0)",message="must not be empty unless spec.typeMatching is exact",fieldPath=".source"
// +kubebuilder:validation:XValidation:rule="(has(self.typeMatching) && self.typeMatching == 'exact') || self.types.all(t, !t.startsWith('sap.kyma.custom'))",message="with standard type matching, a type must not start with sap.kyma.custom (use typeMatching: exact for such types)",fieldPath=".types"
// +kubebuilder:validation:XValidation:rule="!(has(self.typeMatching) && self.typeMatching == 'exact') || self.types.all(t, !t.matches('[\\\\s*>]'))",message="with exact type matching, a type must not contain whitespace, '*' or '>' (it would be a NATS wildcard or an invalid subject; standard matching removes them)",fieldPath=".types"
type SubscriptionSpec struct {
	// ID is a read-only identifier kept for compatibility with Kyma.
	// +optional
	ID string `json:"id,omitempty"`

	// Sink is where matching events are delivered: the http(s) URL of a
	// Service in the Subscription's namespace,
	// http://<service>.<namespace>.svc.cluster.local[:port][/path].
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="must have URL scheme 'http' or 'https'"
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#]*\\\\.svc\\\\.cluster\\\\.local(:[0-9]+)?([/?#].*)?$')",message="must be a cluster-local Service URL ending in .svc.cluster.local, like http://<service>.<namespace>.svc.cluster.local"
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[a-z0-9]([-a-z0-9]*[a-z0-9])?\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?\\\\.svc\\\\.cluster\\\\.local(:[0-9]+)?([/?#].*)?$')",message="the host must have 5 labels, <service>.<namespace>.svc.cluster.local, with valid Service and namespace names"
	Sink string `json:"sink"`

	// TypeMatching is standard (default) or exact.
	// +kubebuilder:default:="standard"
	// +optional
	TypeMatching TypeMatching `json:"typeMatching,omitempty"`

	// Source is the origin of the events (the CloudEvents source, or the
	// application name of legacy events). Required unless typeMatching is
	// exact.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.matches('\\\\s')",message="must be a valid URI reference (no whitespace)"
	Source string `json:"source"`

	// Types are the event types to receive. With standard matching they
	// are cleaned as Kyma cleans them (whitespace and the characters
	// > * / \ removed; status.types shows the cleaned form), so two types
	// that clean alike receive the same events.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.all(t, t.contains('.'))",message="an event type must have at least two segments separated by '.'"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !t.matches('(^|[.])[\\\\s>*/\\\\\\\\]*([.]|$)'))",message="an event type must not have empty segments, before or after cleaning (whitespace and the characters > * / \\ are removed)"
	Types []string `json:"types"`

	// Config holds delivery settings as strings; see the Config* key
	// constants for the keys, their meaning and their defaults.
	// +optional
	// +kubebuilder:default:={"maxInFlightMessages":"10"}
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['maxInFlightMessages','maxDeliver','backoffInitial','backoffMax','deadLetter','maxBacklog','maxBacklogBytes','ordering','protocol','contentMode','exemptHandshake','qos','type','grantType','clientId','clientSecret','tokenUrl','scope'])",message="unknown key; kfn understands maxInFlightMessages, maxDeliver, backoffInitial, backoffMax, deadLetter, maxBacklog, maxBacklogBytes and ordering (and accepts Kyma's EventMesh keys protocol, contentMode, exemptHandshake, qos, type, grantType, clientId, clientSecret, tokenUrl, scope)"
	// +kubebuilder:validation:XValidation:rule="!('maxInFlightMessages' in self) || (self['maxInFlightMessages'].matches('^[0-9]{1,9}$') && int(self['maxInFlightMessages']) >= 1 && int(self['maxInFlightMessages']) <= 1000)",message="maxInFlightMessages must be a stringified int value between 1 and 1000"
	// +kubebuilder:validation:XValidation:rule="!('maxBacklog' in self) || (self['maxBacklog'].matches('^[0-9]{1,9}$') && int(self['maxBacklog']) >= 1 && int(self['maxBacklog']) <= 1000000)",message="maxBacklog must be a stringified int value between 1 and 1000000"
	// +kubebuilder:validation:XValidation:rule="!('maxBacklogBytes' in self) || (self['maxBacklogBytes'].matches('^[0-9]{1,10}$') && int(self['maxBacklogBytes']) >= 2097152 && int(self['maxBacklogBytes']) <= 4294967296)",message="maxBacklogBytes must be a stringified int value between 2097152 (2 MiB) and 4294967296 (4 GiB)"
	// +kubebuilder:validation:XValidation:rule="!('ordering' in self) || self['ordering'] in ['none', 'partitionkey']",message="ordering must be none or partitionkey"
	// +kubebuilder:validation:XValidation:rule="!('maxDeliver' in self) || (self['maxDeliver'].matches('^[0-9]{1,9}$') && int(self['maxDeliver']) >= 1 && int(self['maxDeliver']) <= 100)",message="maxDeliver must be a stringified int value between 1 and 100"
	// +kubebuilder:validation:XValidation:rule="!('backoffInitial' in self) || self['backoffInitial'].matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="backoffInitial must be a duration such as 500ms, 1s or 1m30s"
	// +kubebuilder:validation:XValidation:rule="!('backoffMax' in self) || self['backoffMax'].matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$')",message="backoffMax must be a duration such as 30s, 5m or 1h"
	// +kubebuilder:validation:XValidation:rule="!('backoffInitial' in self) || !self['backoffInitial'].matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || duration(self['backoffInitial']) >= duration('10ms')",message="backoffInitial must be at least 10ms"
	// +kubebuilder:validation:XValidation:rule="!('backoffMax' in self) || !self['backoffMax'].matches('^([0-9]+(\\\\.[0-9]+)?(ms|s|m|h))+$') || duration(self['backoffMax']) >= duration('10ms')",message="backoffMax must be at least 10ms"
	// +kubebuilder:validation:XValidation:rule="!('deadLetter' in self) || self['deadLetter'] in ['true','false']",message="deadLetter must be \"true\" or \"false\""
	Config map[string]ConfigValue `json:"config,omitempty"`
}

// ConfigValue is a value of spec.config: a string of at most 256 characters.
// +kubebuilder:validation:MaxLength=256
type ConfigValue string

// EventType pairs a type as written with its cleaned form.
type EventType struct {
	// OriginalType is the type as written in the spec.
	OriginalType string `json:"originalType"`
	// CleanType is the type after cleaning, as matched against events.
	CleanType string `json:"cleanType"`
}

// JetStreamTypes names the JetStream consumer that serves a type.
type JetStreamTypes struct {
	// OriginalType is the type as written in the spec.
	OriginalType string `json:"originalType"`
	// ConsumerName is the durable JetStream consumer serving it.
	// +optional
	ConsumerName string `json:"consumerName,omitempty"`
}

// Backend is the backend-specific part of the status. kfn fills Types (its
// NATS JetStream backend); the EventMesh fields of Kyma are kept so that a
// Kyma status reads back unchanged.
type Backend struct {
	// Types maps each type to the JetStream consumer serving it.
	// +optional
	Types []JetStreamTypes `json:"types,omitempty"`

	// Ev2hash is a Kyma EventMesh field, unused by kfn.
	// +optional
	Ev2hash int64 `json:"ev2hash,omitempty"`
	// EventMeshHash is a Kyma EventMesh field, unused by kfn.
	// +optional
	EventMeshHash int64 `json:"emshash,omitempty"`
	// EventMeshLocalHash is a Kyma EventMesh field, unused by kfn.
	// +optional
	EventMeshLocalHash int64 `json:"eventMeshLocalHash,omitempty"`
	// WebhookAuthHash is a Kyma EventMesh field, unused by kfn.
	// +optional
	WebhookAuthHash int64 `json:"webhookAuthHash,omitempty"`
	// ExternalSink is a Kyma EventMesh field, unused by kfn.
	// +optional
	ExternalSink string `json:"externalSink,omitempty"`
	// FailedActivation is a Kyma EventMesh field, unused by kfn.
	// +optional
	FailedActivation string `json:"failedActivation,omitempty"`
	// APIRuleName is a Kyma EventMesh field, unused by kfn.
	// +optional
	APIRuleName string `json:"apiRuleName,omitempty"`
}

// SubscriptionStatus is the observed state of a Subscription.
type SubscriptionStatus struct {
	// Conditions describe the Subscription's state; see the Condition* types.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`

	// Ready is true when every condition is True: events are being delivered.
	Ready bool `json:"ready"`

	// Types are the spec's types with their cleaned forms. Always written,
	// as an empty list when there are none.
	Types []EventType `json:"types"`

	// Backend is the JetStream-specific status.
	// +optional
	Backend Backend `json:"backend,omitempty"`
}

// Subscription delivers events of the given types from the given source to
// a sink, at least once.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={all,kyma-eventing}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.ready"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Subscription struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec SubscriptionSpec `json:"spec"`
	// Status is the observed state, written by the event bridge.
	// +optional
	Status SubscriptionStatus `json:"status,omitempty"`
}

// SubscriptionList is a list of Subscriptions.
//
// +kubebuilder:object:root=true
type SubscriptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Subscriptions.
	Items []Subscription `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Subscription{}, &SubscriptionList{})
}

// Matching returns spec.typeMatching, standard when empty (the API default).
func (s *Subscription) Matching() TypeMatching {
	if s.Spec.TypeMatching == "" {
		return TypeMatchingStandard
	}
	return s.Spec.TypeMatching
}
