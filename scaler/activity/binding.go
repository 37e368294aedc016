package activity

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// Binding is what the scaler needs of one Subscription: the Function it
// feeds, its JetStream consumer and the subjects of its events.
type Binding struct {
	// Subscription is the Subscription's namespace and name.
	Subscription types.NamespacedName
	// Function is the Function whose Service is the Subscription's sink.
	Function types.NamespacedName
	// Consumer is the name of the Subscription's durable consumer.
	Consumer string
	// Subjects are the core NATS subjects whose messages the consumer
	// counts; wildcards allowed.
	Subjects []string
}

// BindingFor returns the Binding of sub: its sink's Service (in the
// Subscription's namespace) is the Function, its consumer is named by
// stream.ConsumerName, and its subjects are its filter subjects, as
// published to partition 0 and to any other (stream.PublishSubject), plus
// the consumer's replay subject, so that a replay wakes its Function from zero
// (the consumer filters on that subject only while replays wait; see
// package eventbridge/replay). The error wraps the api package's
// ErrInvalidSink or ErrInvalidEventType; such a Subscription has no
// consumer and feeds no Function.
func BindingFor(sub *eventingv1alpha2.Subscription) (Binding, error) {
	sink, err := sub.ValidateSink()
	if err != nil {
		return Binding{}, fmt.Errorf("subscription %s/%s: %w", sub.Namespace, sub.Name, err)
	}
	subjects, err := sub.FilterSubjects()
	if err != nil {
		return Binding{}, fmt.Errorf("subscription %s/%s: %w", sub.Namespace, sub.Name, err)
	}
	consumer := stream.ConsumerName(sub.Namespace, sub.Name)
	for _, s := range subjects {
		subjects = append(subjects, stream.PartitionSubjectPrefix+".*."+s) // published to another partition
	}
	return Binding{
		Subscription: types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name},
		Function:     types.NamespacedName{Namespace: sink.Namespace, Name: sink.Service},
		Consumer:     consumer,
		Subjects:     append(subjects, stream.ReplaySubject(consumer)),
	}, nil
}
