package subscription

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Defaults of a namespace's limits (Reconciler.MaxConsumersPerNamespace,
// MaxSubscriptionsPerType).
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

// maxConsumersPerNamespace is MaxConsumersPerNamespace or its default.
func (r *Reconciler) maxConsumersPerNamespace() int {
	if r.MaxConsumersPerNamespace > 0 {
		return r.MaxConsumersPerNamespace
	}
	return max(r.Applier.Streams.MaxConsumers/ConsumerShareOfStream, 1)
}

// maxSubscriptionsPerType is MaxSubscriptionsPerType or its default.
func (r *Reconciler) maxSubscriptionsPerType() int {
	if r.MaxSubscriptionsPerType > 0 {
		return r.MaxSubscriptionsPerType
	}
	return DefaultMaxSubscriptionsPerType
}

// overLimits says why sub may not have a consumer for its namespace's
// limits (the error wraps ErrNamespaceLimit), nil when it may; listErr is
// why the namespace's Subscriptions could not be listed. A namespace's
// Subscriptions not being deleted take their places in the order they
// were made (then by name): one gets a consumer when fewer than
// MaxConsumersPerNamespace were made before it, and fewer than
// MaxSubscriptionsPerType of those receive each of its event types. So
// the places of a namespace's Subscriptions never change with another
// namespace's, a Subscription never loses its place to a newer one, and
// one tenant cannot take every consumer of the shared event stream nor
// turn one publish into more deliveries than the limit. It reads the
// manager's cache, without copying it.
func (r *Reconciler) overLimits(ctx context.Context, sub *v1alpha2.Subscription) (over, listErr error) {
	var list v1alpha2.SubscriptionList
	if err := r.Client.List(ctx, &list, client.InNamespace(sub.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the Subscriptions of namespace %s: %w", sub.Namespace, err)
	}
	mine, _ := sub.FilterSubjects() // invalid types: the spec's error says so
	perType := make(map[string]int, len(mine))
	for _, s := range mine {
		perType[s] = 0
	}
	before := 0
	for i := range list.Items {
		other := &list.Items[i]
		if !other.DeletionTimestamp.IsZero() || !madeBefore(other, sub) {
			continue
		}
		before++
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
	if most := r.maxConsumersPerNamespace(); before >= most {
		return fmt.Errorf("%w: %d Subscriptions of namespace %s were made before this one, and a namespace may have %d with a consumer (the event bridge's -max-consumers-per-namespace): no consumer, events published meanwhile are not kept for it",
			ErrNamespaceLimit, before, sub.Namespace, most), nil
	}
	most := r.maxSubscriptionsPerType()
	var full []string
	for _, s := range mine {
		if perType[s] >= most {
			full = append(full, s)
		}
	}
	if len(full) > 0 {
		return fmt.Errorf("%w: %d Subscriptions of namespace %s made before this one receive %s, and a namespace may have %d per event type (the event bridge's -max-subscriptions-per-type): no consumer, events published meanwhile are not kept for it",
			ErrNamespaceLimit, perType[full[0]], sub.Namespace, strings.Join(full, ", "), most), nil
	}
	return nil, nil
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
