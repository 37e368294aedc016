package subscription

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Observation is what the reconciler learned about a Subscription; Status
// turns it into Kyma's status.
type Observation struct {
	// SpecError is why the spec cannot be served (invalid sink, missing
	// Service, invalid config or types), nil when it can.
	SpecError error
	// ConsumerError is why the consumer could not be created or updated,
	// nil when it exists as desired. With a SpecError, it is why the
	// consumer of the invalid spec could not be deleted, and the status
	// ignores it.
	ConsumerError error
	// Consumer is the consumer's name when it exists.
	Consumer string
}

// Status computes the Subscription's status from an observation, starting
// from its current status so that transition times are kept: types with
// their clean forms, backend.types with the consumer serving each, and the
// two conditions, from which ready follows. A Subscription with a wrong
// sink is never ready.
func Status(sub *v1alpha2.Subscription, o Observation, now metav1.Time) v1alpha2.SubscriptionStatus {
	s := *sub.Status.DeepCopy()
	s.Types = sub.CleanTypes()
	s.Backend.Types = nil
	if o.SpecError == nil && o.ConsumerError == nil && o.Consumer != "" {
		for _, t := range sub.Spec.Types {
			s.Backend.Types = append(s.Backend.Types, v1alpha2.JetStreamTypes{OriginalType: t, ConsumerName: o.Consumer})
		}
	}
	switch {
	case o.SpecError != nil:
		s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionFalse, v1alpha2.ReasonSpecInvalid, o.SpecError.Error(), now)
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionFalse, v1alpha2.ReasonNATSSubscriptionNotActive, "no consumer while the spec has errors", now)
	case o.ConsumerError != nil:
		s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionTrue, v1alpha2.ReasonSpecValid, "", now)
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionFalse, v1alpha2.ReasonNATSSubscriptionNotActive, o.ConsumerError.Error(), now)
	default:
		s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionTrue, v1alpha2.ReasonSpecValid, "", now)
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionTrue, v1alpha2.ReasonNATSSubscriptionActive, fmt.Sprintf("consumer %s", o.Consumer), now)
	}
	return s
}
