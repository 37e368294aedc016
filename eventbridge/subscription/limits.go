package subscription

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// Defaults of a namespace's limits (Limits).
const (
	// ConsumerShareOfStream divides the event stream's MaxConsumers into
	// the default MaxConsumersPerNamespace: 99 namespaces at their limit
	// leave a 100th of the consumers to every other (100 of the default
	// 10,000).
	ConsumerShareOfStream = 100
	// DefaultMaxSubscriptionsPerType bounds one namespace's Subscriptions
	// of one event type (subject): how many deliveries one publish can
	// become for one namespace.
	DefaultMaxSubscriptionsPerType = 20
)

// ErrNamespaceLimit is wrapped by the reason a Subscription has no
// consumer for its namespace's limits.
var ErrNamespaceLimit = errors.New("namespace's limit of Subscriptions reached")

// Limits bound one namespace's Subscriptions that get a consumer: all of
// them, and those of one event type (subject). A namespace's Subscriptions
// take their places in the order they were made: one gets a consumer when
// fewer than MaxConsumersPerNamespace were made before it, and fewer than
// MaxSubscriptionsPerType of those receive each of its event types. So the
// places of a namespace's Subscriptions never change with another
// namespace's, a Subscription never loses its place to a newer one, one
// tenant cannot take every consumer of the shared event stream, and one
// publish becomes at most MaxSubscriptionsPerType deliveries for a
// namespace.
type Limits struct {
	// MaxConsumersPerNamespace is 0 for a ConsumerShareOfStream-th of the
	// event stream's MaxConsumers.
	MaxConsumersPerNamespace int
	// MaxSubscriptionsPerType is 0 for DefaultMaxSubscriptionsPerType.
	MaxSubscriptionsPerType int
}

// consumers is MaxConsumersPerNamespace or its default for streams.
func (l Limits) consumers(streams stream.Config) int {
	if l.MaxConsumersPerNamespace > 0 {
		return l.MaxConsumersPerNamespace
	}
	return max(streams.MaxConsumers/ConsumerShareOfStream, 1)
}

// perType is MaxSubscriptionsPerType or its default.
func (l Limits) perType() int {
	if l.MaxSubscriptionsPerType > 0 {
		return l.MaxSubscriptionsPerType
	}
	return DefaultMaxSubscriptionsPerType
}

// Over says why sub may not have a consumer, given the Subscriptions of
// its namespace made before it (earlier ones, not being deleted); the
// error wraps ErrNamespaceLimit. Nil: it may.
func (l Limits) Over(sub *v1alpha2.Subscription, before []*v1alpha2.Subscription, streams stream.Config) error {
	mine, _ := sub.FilterSubjects() // invalid types: the spec's error says so
	perType := make(map[string]int, len(mine))
	for _, s := range mine {
		perType[s] = 0
	}
	for _, other := range before {
		subjects, err := other.FilterSubjects()
		if err != nil {
			continue
		}
		for _, s := range subjects {
			if n, ok := perType[s]; ok {
				perType[s] = n + 1
			}
		}
	}
	if most := l.consumers(streams); len(before) >= most {
		return fmt.Errorf("%w: %d Subscriptions of namespace %s were made before this one, and a namespace may have %d with a consumer (the event bridge's -max-consumers-per-namespace): no consumer, events published meanwhile are not kept for it",
			ErrNamespaceLimit, len(before), sub.Namespace, most)
	}
	most := l.perType()
	var full []string
	for _, s := range mine {
		if perType[s] >= most {
			full = append(full, s)
		}
	}
	if len(full) > 0 {
		return fmt.Errorf("%w: %d Subscriptions of namespace %s made before this one receive %s, and a namespace may have %d per event type (the event bridge's -max-subscriptions-per-type): no consumer, events published meanwhile are not kept for it",
			ErrNamespaceLimit, perType[full[0]], sub.Namespace, strings.Join(full, ", "), most)
	}
	return nil
}

// overLimits is Limits.Over for a Subscription of the cluster, with the
// Subscriptions of its namespace read from the manager's cache (without
// copying them) and taken in the order they were made (then by name);
// listErr is why they could not be listed.
func (r *Reconciler) overLimits(ctx context.Context, sub *v1alpha2.Subscription) (over, listErr error) {
	var list v1alpha2.SubscriptionList
	if err := r.Client.List(ctx, &list, client.InNamespace(sub.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the Subscriptions of namespace %s: %w", sub.Namespace, err)
	}
	var before []*v1alpha2.Subscription
	for i := range list.Items {
		other := &list.Items[i]
		if other.DeletionTimestamp.IsZero() && madeBefore(other, sub) {
			before = append(before, other)
		}
	}
	return r.Applier.Limits.Over(sub, before, r.Applier.Streams), nil
}

// madeBefore reports whether a was made before b: earlier, or in the
// same second with a name that sorts first.
func madeBefore(a, b *v1alpha2.Subscription) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}
