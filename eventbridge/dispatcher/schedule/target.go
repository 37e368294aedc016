package schedule

import (
	"reflect"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// target is what a worker needs of a Subscription; workers restart when it
// changes.
type target struct {
	sub      *v1alpha2.Subscription
	sink     v1alpha2.Sink
	delivery v1alpha2.Delivery
	consumer string
	// partition is the event stream's partition the worker serves, stream
	// its stream's name: a Subscription has a consumer, and a worker, in
	// each.
	partition int
	stream    string
	// invalid, when not nil, is why the Subscription cannot be served: its
	// worker delivers nothing and only holds its consumer's backlog within
	// the budget (see Upsert).
	invalid error
}

// holdTarget is the target of a Subscription whose spec cannot be served
// (invalid says why): its consumer's name and a budget, from its own
// spec.config if that can be read, else from the worker it had (old may
// be nil), else from defaults.
func holdTarget(sub *v1alpha2.Subscription, invalid error, defaults v1alpha2.Delivery, old *worker) target {
	delivery, err := sub.DeliveryOver(defaults)
	if err != nil {
		delivery = defaults
		if old != nil {
			delivery = old.target.delivery
		}
	}
	return target{sub: sub.DeepCopy(), delivery: delivery, consumer: stream.ConsumerName(sub.Namespace, sub.Name), invalid: invalid}
}

func newTarget(sub *v1alpha2.Subscription, defaults v1alpha2.Delivery) (target, error) {
	sink, err := sub.ValidateSink()
	if err != nil {
		return target{}, err
	}
	delivery, err := sub.DeliveryOver(defaults)
	if err != nil {
		return target{}, err
	}
	return target{sub: sub.DeepCopy(), sink: sink, delivery: delivery, consumer: stream.ConsumerName(sub.Namespace, sub.Name)}, nil
}

// in returns t of partition p of streams.
func (t target) in(streams stream.Config, p int) target {
	t.partition, t.stream = p, streams.PartitionStream(p)
	return t
}

func sameTarget(a, b target) bool {
	return a.delivery == b.delivery && a.consumer == b.consumer && a.stream == b.stream && (a.invalid == nil) == (b.invalid == nil) &&
		reflect.DeepEqual(a.sub.Spec, b.sub.Spec)
}
