package subscription

import (
	"fmt"
	"time"

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
	// Consumer is the consumer's name when it exists, also while the spec
	// has errors (the events published meanwhile wait in it).
	Consumer string
	// Created says the consumer did not exist and was made.
	Created bool
	// Lost says the consumer that served the Subscription was missing
	// when it was looked for (NATS lost it, with its stream or alone, and
	// the events that waited in it) and was made anew; the caller, which
	// knows the consumer existed, sets it.
	Lost bool
	// Limited is why the Subscription has no consumer for its namespace's
	// limits (wrapping ErrNamespaceLimit), nil when it is within them.
	Limited error
}

// EventsLostFor is how long the condition that says a Subscription's
// events were lost stays after the loss.
const EventsLostFor = 24 * time.Hour

// Status computes the Subscription's status from an observation, starting
// from its current status so that transition times are kept: types with
// their clean forms, backend.types with the consumer serving each (while
// it exists, also while the spec has errors), and the two conditions, from
// which ready follows; a Subscription over its namespace's limits
// (Observation.Limited) is not active, and says why. A Subscription with
// a wrong sink is never ready.
// After a loss (Observation.Lost) the condition "Events kept" is False for
// EventsLostFor; it does not change ready.
func Status(sub *v1alpha2.Subscription, o Observation, now metav1.Time) v1alpha2.SubscriptionStatus {
	s := *sub.Status.DeepCopy()
	s.Types = sub.CleanTypes()
	if o.ConsumerError == nil {
		// Kept as it was after a ConsumerError: the consumer may exist, and
		// the name is how a later reconcile knows that it did.
		s.Backend.Types = nil
		if o.Consumer != "" {
			for _, t := range sub.Spec.Types {
				s.Backend.Types = append(s.Backend.Types, v1alpha2.JetStreamTypes{OriginalType: t, ConsumerName: o.Consumer})
			}
		}
	}
	switch {
	case o.Limited != nil:
		if o.SpecError != nil {
			s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionFalse, v1alpha2.ReasonSpecInvalid, o.SpecError.Error(), now)
		} else {
			s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionTrue, v1alpha2.ReasonSpecValid, "", now)
		}
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionFalse, v1alpha2.ReasonNamespaceLimit, o.Limited.Error(), now)
	case o.SpecError != nil:
		s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionFalse, v1alpha2.ReasonSpecInvalid, o.SpecError.Error(), now)
		waiting := "no consumer while the spec has errors: events published meanwhile are not kept for it"
		if o.Consumer != "" {
			waiting = fmt.Sprintf("nothing is delivered while the spec has errors; the events published meanwhile wait in consumer %s (up to the Subscription's maxBacklog) and are delivered once it is fixed", o.Consumer)
		}
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionFalse, v1alpha2.ReasonNATSSubscriptionNotActive, waiting, now)
	case o.ConsumerError != nil:
		s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionTrue, v1alpha2.ReasonSpecValid, "", now)
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionFalse, v1alpha2.ReasonNATSSubscriptionNotActive, o.ConsumerError.Error(), now)
	default:
		s.SetCondition(v1alpha2.ConditionSubscriptionSpecValid, corev1.ConditionTrue, v1alpha2.ReasonSpecValid, "", now)
		s.SetCondition(v1alpha2.ConditionSubscriptionActive, corev1.ConditionTrue, v1alpha2.ReasonNATSSubscriptionActive, fmt.Sprintf("consumer %s", o.Consumer), now)
	}
	switch lost := s.FindCondition(v1alpha2.ConditionEventsKept); {
	case o.Lost:
		s.SetCondition(v1alpha2.ConditionEventsKept, corev1.ConditionFalse, v1alpha2.ReasonConsumerLost,
			fmt.Sprintf("NATS lost consumer %s (with its stream, or alone) and the events that waited in it; it was made anew at %s, and events published since are kept", o.Consumer, now.UTC().Format(time.RFC3339)), now)
	case lost != nil && now.Sub(lost.LastTransitionTime.Time) >= EventsLostFor:
		s.RemoveCondition(v1alpha2.ConditionEventsKept)
	}
	return s
}
