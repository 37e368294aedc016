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
	// ReserveShare divides both the event stream's consumers and a
	// namespace's limit: the stream's last ReserveShare-th of consumers
	// (2,500 of the default 10,000) goes only to a namespace's first
	// ReserveShare-th of its Subscriptions (25 of the default 100), so
	// that the namespaces at their limits leave every other namespace's
	// first Subscriptions their consumers: it takes 75 namespaces at their
	// limit and 100 more at a quarter of it to fill the stream, not 100.
	ReserveShare = 4
)

// ErrNamespaceLimit is wrapped by the reason a Subscription has no
// consumer for its namespace's limits.
var ErrNamespaceLimit = errors.New("namespace's limit of Subscriptions reached")

// ErrStreamReserve is wrapped, with ErrNamespaceLimit, by the reason a
// Subscription waits for room in the event stream (Limits.Reserve).
var ErrStreamReserve = errors.New("the event stream's last consumers are kept for namespaces' first Subscriptions")

// Limits bound one namespace's Subscriptions that get a consumer: all of
// them, and those of one event type (subject). A namespace's Subscriptions
// take their places in the order they were made: one gets a consumer when
// fewer than MaxConsumersPerNamespace were made before it, and fewer than
// MaxSubscriptionsPerType of those receive each of its event types. So the
// places of a namespace's Subscriptions never change with another
// namespace's, a Subscription never loses its place to a newer one, one
// tenant cannot take every consumer of the shared event stream, and one
// publish becomes at most MaxSubscriptionsPerType deliveries for a
// namespace. Past the first ReserveShare-th of its limit, a Subscription
// also needs the stream to have room to spare for its first consumer (see
// Reserve); one with a consumer keeps it whatever others do.
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

// NeedsRoom reports whether a Subscription at place (the number of its
// namespace's Subscriptions made before it) gets a consumer it does not
// have yet only while the event stream has room to spare: past the
// first ReserveShare-th of its namespace's limit. Ask Reserve then.
func (l Limits) NeedsRoom(place int, streams stream.Config) bool {
	return place >= l.reserveFrom(streams)
}

// reserveFrom is the first place of a namespace's Subscriptions that does
// not draw on the stream's reserve: a ReserveShare-th of its limit.
func (l Limits) reserveFrom(streams stream.Config) int {
	return max(l.consumers(streams)/ReserveShare, 1)
}

// spare is how many of the event stream's consumers any Subscription
// within its namespace's limits may take: all but the reserve, the last
// ReserveShare-th.
func spare(streams stream.Config) int {
	return streams.MaxConsumers - streams.MaxConsumers/ReserveShare
}

// Reserve says why sub, at place (see NeedsRoom) and without a consumer
// yet, may not have one now that the event stream holds held consumers
// in all: past its namespace's first ReserveShare-th, a Subscription gets
// a new consumer only while the stream holds fewer than all but its last
// ReserveShare-th, which is kept for every namespace's first ones. One
// that has its consumer keeps it. The error wraps ErrNamespaceLimit and
// ErrStreamReserve. Nil: it may.
func (l Limits) Reserve(sub *v1alpha2.Subscription, place, held int, streams stream.Config) error {
	if !l.NeedsRoom(place, streams) || held < spare(streams) {
		return nil
	}
	return fmt.Errorf("%w: %w: %d Subscriptions of namespace %s were made before this one, and the event stream holds %d consumers of its %d: the last %d are kept for the first %d Subscriptions of every namespace (a %dth of the event bridge's -max-consumers-per-namespace): no consumer until the stream holds fewer than %d, events published meanwhile are not kept for it",
		ErrNamespaceLimit, ErrStreamReserve, place, sub.Namespace, held, streams.MaxConsumers, streams.MaxConsumers-spare(streams), l.reserveFrom(streams), ReserveShare, spare(streams))
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

// overLimits is Limits.Over, then Limits.Reserve, for a Subscription of
// the cluster, with the Subscriptions of its namespace read from the
// manager's cache (without copying them) and taken in the order they were
// made (then by name); err is why they, or the event stream's consumers,
// could not be read.
func (r *Reconciler) overLimits(ctx context.Context, sub *v1alpha2.Subscription) (over, err error) {
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
	if over := r.Applier.Limits.Over(sub, before, r.Applier.Streams); over != nil {
		return over, nil
	}
	if !r.Applier.Limits.NeedsRoom(len(before), r.Applier.Streams) || hadConsumer(sub) {
		return nil, nil
	}
	return r.Applier.reserve(ctx, sub, len(before))
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
