package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition is Kyma's Subscription condition. Its types and reasons are
// sentences (with spaces), so it is not a metav1.Condition.
type Condition struct {
	// Type is what the condition is about.
	// +optional
	Type ConditionType `json:"type,omitempty"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastTransitionTime is when Status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is why, in a short sentence.
	// +optional
	Reason ConditionReason `json:"reason,omitempty"`
	// Message gives the details, such as what to fix.
	// +optional
	Message string `json:"message,omitempty"`
}

// ConditionType is a Subscription condition type.
type ConditionType string

// The condition types kfn writes, with Kyma's names.
const (
	// ConditionSubscriptionSpecValid is False while the spec has an error
	// only a lookup finds (a sink Service that does not exist, a sink in
	// another namespace).
	ConditionSubscriptionSpecValid ConditionType = "Subscription spec valid"
	// ConditionSubscriptionActive is True once the JetStream consumer exists
	// and the dispatcher serves it.
	ConditionSubscriptionActive ConditionType = "Subscription active"
	// ConditionEventsKept is kfn's own: it is there only after NATS lost
	// the Subscription's consumer (with its stream, or alone) and the
	// events that waited in it, False for a day after the loss. It does
	// not change ready.
	ConditionEventsKept ConditionType = "Events kept"
)

// ConditionReason is the reason of a Subscription condition.
type ConditionReason string

// The condition reasons kfn writes, with Kyma's names.
const (
	// ReasonSpecValid goes with ConditionSubscriptionSpecValid True.
	ReasonSpecValid ConditionReason = "Subscription spec has no validation errors"
	// ReasonSpecInvalid goes with ConditionSubscriptionSpecValid False.
	ReasonSpecInvalid ConditionReason = "Subscription spec has validation errors"
	// ReasonNATSSubscriptionActive goes with ConditionSubscriptionActive True.
	ReasonNATSSubscriptionActive ConditionReason = "NATS Subscription active"
	// ReasonNATSSubscriptionNotActive goes with ConditionSubscriptionActive False.
	ReasonNATSSubscriptionNotActive ConditionReason = "NATS Subscription not active"
	// ReasonNamespaceLimit goes with ConditionSubscriptionActive False
	// when the namespace has as many Subscriptions as it may have
	// consumers, or as many on one of the Subscription's event types as
	// it may have: the Subscription gets no consumer (kfn's own).
	ReasonNamespaceLimit ConditionReason = "Namespace's limit of Subscriptions reached"
	// ReasonConsumerLost goes with ConditionEventsKept False.
	ReasonConsumerLost ConditionReason = "NATS lost the consumer and the events waiting in it"
)

// SetCondition sets the condition of type t, keeping its transition time
// when the status does not change, and recomputes Ready: true exactly when
// every condition kfn writes is present and True.
func (s *SubscriptionStatus) SetCondition(t ConditionType, status corev1.ConditionStatus, reason ConditionReason, message string, now metav1.Time) {
	c := Condition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now}
	replaced := false
	for i := range s.Conditions {
		if s.Conditions[i].Type != t {
			continue
		}
		if s.Conditions[i].Status == status {
			c.LastTransitionTime = s.Conditions[i].LastTransitionTime
		}
		s.Conditions[i] = c
		replaced = true
	}
	if !replaced {
		s.Conditions = append(s.Conditions, c)
	}
	s.Ready = s.allTrue()
}

// RemoveCondition removes the condition of type t, if any, and recomputes
// Ready.
func (s *SubscriptionStatus) RemoveCondition(t ConditionType) {
	out := s.Conditions[:0]
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
	s.Ready = s.allTrue()
}

// FindCondition returns the condition of type t, or nil.
func (s *SubscriptionStatus) FindCondition(t ConditionType) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func (s *SubscriptionStatus) allTrue() bool {
	for _, t := range []ConditionType{ConditionSubscriptionSpecValid, ConditionSubscriptionActive} {
		c := s.FindCondition(t)
		if c == nil || c.Status != corev1.ConditionTrue {
			return false
		}
	}
	return true
}
