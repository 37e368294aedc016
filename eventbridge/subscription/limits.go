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
	// (2,500 of the default 10,000) goes only to namespaces holding fewer
	// than a ReserveShare-th of their limit (25 of the default 100), so
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
// namespace. A namespace holding a ReserveShare-th of its limit in
// consumers also needs the stream to have room to spare for another (see
// Reserve); a Subscription with a consumer keeps it whatever others do.
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

// NeedsRoom reports whether a Subscription of a namespace that holds held
// consumers (its other Subscriptions') gets one it does not have yet only
// while the event stream has room to spare: when held is a
// ReserveShare-th of the namespace's limit or more. Ask Reserve then.
// What counts is consumers held, not places: a namespace whose first
// Subscriptions had none (an invalid spec) while its later ones took the
// room to spare does not have the reserve for them afterwards.
func (l Limits) NeedsRoom(held int, streams stream.Config) bool {
	return held >= l.reserveFrom(streams)
}

// reserveFrom is how many consumers a namespace holds from which it no
// longer draws on the stream's reserve: a ReserveShare-th of its limit.
func (l Limits) reserveFrom(streams stream.Config) int {
	return max(l.consumers(streams)/ReserveShare, 1)
}

// spare is how many of the event stream's consumers any Subscription
// within its namespace's limits may take: all but the reserve, the last
// ReserveShare-th.
func spare(streams stream.Config) int {
	return streams.MaxConsumers - streams.MaxConsumers/ReserveShare
}

// Reserve says why sub, without a consumer yet, may not have one now that
// its namespace holds held consumers and the event stream total: a
// namespace holding a ReserveShare-th of its limit or more gets a new
// consumer only while the stream holds fewer than all but its last
// ReserveShare-th, which is kept for namespaces holding fewer. One that
// has its consumer keeps it. The error wraps ErrNamespaceLimit and
// ErrStreamReserve. Nil: it may.
func (l Limits) Reserve(sub *v1alpha2.Subscription, held, total int, streams stream.Config) error {
	if !l.NeedsRoom(held, streams) || total < spare(streams) {
		return nil
	}
	return fmt.Errorf("%w: %w: namespace %s holds %d consumers, and the event stream holds %d consumers of its %d: the last %d are kept for namespaces holding fewer than %d (a %dth of the event bridge's -max-consumers-per-namespace): no consumer until the stream holds fewer than %d, events published meanwhile are not kept for it",
		ErrNamespaceLimit, ErrStreamReserve, sub.Namespace, held, total, streams.MaxConsumers, streams.MaxConsumers-spare(streams), l.reserveFrom(streams), ReserveShare, spare(streams))
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
	held := 0 // the consumers its namespace's others hold, as their statuses say
	for i := range list.Items {
		other := &list.Items[i]
		if other.DeletionTimestamp.IsZero() && madeBefore(other, sub) {
			before = append(before, other)
		}
		if other.Name != sub.Name && hadConsumer(other) {
			held++
		}
	}
	if over := r.Applier.Limits.Over(sub, before, r.Applier.Streams); over != nil {
		return over, nil
	}
	if !r.Applier.Limits.NeedsRoom(held, r.Applier.Streams) || hadConsumer(sub) {
		return nil, nil
	}
	return r.Applier.reserve(ctx, sub, held)
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
