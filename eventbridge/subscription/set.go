package subscription

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/internal/feed"
)

// Set serves a whole set of Subscriptions read from manifests, without
// Kubernetes: the event bridge's -subscriptions mode and kfn dev. Each
// Subscription is applied to JetStream by the Applier and handed to every
// Target, as the Reconciler and the Feeder do in a cluster. It is safe for
// concurrent use.
type Set struct {
	applier Applier
	targets []feed.Targets

	mu   sync.Mutex
	subs map[types.NamespacedName]*v1alpha2.Subscription
	// made are the Subscriptions whose consumer the Set saw exist: one
	// made anew later was lost by NATS.
	made map[types.NamespacedName]bool
	// limited are the Subscriptions over their namespace's limits: they
	// have no consumer.
	limited map[types.NamespacedName]bool
}

// ErrConsumerLost is wrapped by the error about a Subscription whose
// consumer NATS lost (with its stream, or alone), and with it the events
// that waited in it; the consumer was made anew.
var ErrConsumerLost = errors.New("NATS lost the consumer and the events waiting in it; it was made anew")

// NewSet returns an empty Set that applies with a and serves through
// targets.
func NewSet(a Applier, targets ...feed.Targets) *Set {
	return &Set{applier: a, targets: targets, subs: map[types.NamespacedName]*v1alpha2.Subscription{},
		made: map[types.NamespacedName]bool{}, limited: map[types.NamespacedName]bool{}}
}

// Apply makes subs the Subscriptions served. Each one gets its consumer
// and is upserted to every target. One that cannot be served as it is (an
// invalid spec, a consumer NATS refused, a target that refuses it) keeps
// its consumer, with the events waiting in it (see Applier.Apply), and an
// error names it; the dispatcher holds its events, within its backlog
// budget, until it can be served. Only one that is no longer in subs is
// removed from every target and loses its consumer, with the events
// waiting in it, as when a Subscription is deleted in a cluster. A
// namespace's Subscriptions take their places within the applier's Limits
// in the order subs gives them, as they would in the order they were made
// in a cluster: one over them has no consumer (one it had is deleted),
// and its error wraps ErrNamespaceLimit. It returns the errors, one per
// Subscription, "Subscription namespace/name: why" (ErrConsumerLost among
// them). Those no longer in subs are removed first, so that the consumers
// they free count as room for the others.
func (s *Set) Apply(ctx context.Context, subs []*v1alpha2.Subscription) []error {
	want := make(map[types.NamespacedName]*v1alpha2.Subscription, len(subs))
	for _, sub := range subs {
		want[types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}] = sub
	}
	// Those no longer served go first: the consumers they free are room
	// in the event stream for those that wait for it (Limits.Reserve).
	s.mu.Lock()
	var gone []types.NamespacedName
	for key := range s.subs {
		if _, ok := want[key]; !ok {
			gone = append(gone, key)
			delete(s.subs, key)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, key := range gone {
		if err := s.stop(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("Subscription %s: %w", key, err))
		}
	}
	before := map[string][]*v1alpha2.Subscription{}
	holds, held := s.holding(want)
	for _, sub := range subs {
		key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
		others := held[sub.Namespace]
		if holds[key] {
			others--
		}
		over := s.overLimits(ctx, sub, before[sub.Namespace], others)
		before[sub.Namespace] = append(before[sub.Namespace], sub)
		if err := s.serve(ctx, sub, over); err != nil {
			errs = append(errs, fmt.Errorf("Subscription %s/%s: %w", sub.Namespace, sub.Name, err))
		}
		s.mu.Lock()
		now := s.made[key] && !s.limited[key]
		s.mu.Unlock()
		switch {
		case now && !holds[key]:
			held[sub.Namespace]++
		case !now && holds[key]:
			held[sub.Namespace]--
		}
		holds[key] = now
	}
	s.mu.Lock()
	s.subs = want
	s.mu.Unlock()
	return errs
}

// holding returns which of the Subscriptions in want the Set saw with a
// consumer, and how many of them each namespace has.
func (s *Set) holding(want map[types.NamespacedName]*v1alpha2.Subscription) (map[types.NamespacedName]bool, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	holds, held := make(map[types.NamespacedName]bool, len(want)), map[string]int{}
	for key := range want {
		if s.made[key] && !s.limited[key] {
			holds[key] = true
			held[key.Namespace]++
		}
	}
	return holds, held
}

// overLimits is Limits.Over, then Limits.Reserve, for sub after the
// Subscriptions before it in its namespace, whose others hold held
// consumers. When NATS cannot tell how many consumers the event stream
// holds, the reserve is not kept for this Apply (NATS's own bound, the
// stream's MaxConsumers, still is): Apply fails then as well, or NATS
// answers again.
func (s *Set) overLimits(ctx context.Context, sub *v1alpha2.Subscription, before []*v1alpha2.Subscription, held int) error {
	l, streams := s.applier.Limits, s.applier.Streams
	if over := l.Over(sub, before, streams); over != nil || !l.NeedsRoom(held, streams) {
		return over
	}
	over, err := s.applier.reserve(ctx, sub, held)
	if err != nil {
		return nil
	}
	return over
}

// serve applies sub (over its namespace's limits, over says why: it has
// no consumer) and hands it to every target, whether or not its spec
// can be served: a target that cannot serve it says why (the dispatcher
// holds its events meanwhile). The error is the first of the limits', the
// spec's, the consumer's and the targets'.
func (s *Set) serve(ctx context.Context, sub *v1alpha2.Subscription, over error) error {
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
	s.mu.Lock()
	s.limited[key] = over != nil
	s.mu.Unlock()
	var errs []error
	if over != nil {
		errs = append(errs, over, s.forget(ctx, key))
	} else {
		obs, lost := s.apply(ctx, sub)
		errs = append(errs, lost, obs.SpecError, obs.ConsumerError)
	}
	for _, t := range s.targets {
		errs = append(errs, t.Upsert(sub))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// apply applies sub and tells, as an error wrapping ErrConsumerLost, that
// its consumer was made anew after the Set saw it exist.
func (s *Set) apply(ctx context.Context, sub *v1alpha2.Subscription) (Observation, error) {
	obs := s.applier.Apply(ctx, sub)
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost error
	if obs.Created && s.made[key] {
		lost = fmt.Errorf("consumer %s in stream %s: %w", obs.Consumer, s.applier.Streams.EventStream, ErrConsumerLost)
	}
	if obs.Consumer != "" {
		s.made[key] = true
	}
	return obs, lost
}

// stop removes a Subscription from every target and deletes its consumer.
func (s *Set) stop(ctx context.Context, key types.NamespacedName) error {
	for _, t := range s.targets {
		t.Remove(key.Namespace, key.Name)
	}
	s.mu.Lock()
	delete(s.limited, key)
	s.mu.Unlock()
	return s.forget(ctx, key)
}

// forget deletes the Subscription's consumer, and that the Set saw it.
func (s *Set) forget(ctx context.Context, key types.NamespacedName) error {
	s.mu.Lock()
	delete(s.made, key)
	s.mu.Unlock()
	if err := s.applier.Delete(ctx, key.Namespace, key.Name); err != nil {
		return fmt.Errorf("delete its consumer: %w", err)
	}
	return nil
}

// Reapply makes the consumers of the Subscriptions served (within their
// namespace's limits) exist again, for a NATS server that restarted empty
// (recreate the streams first). It
// returns an error per consumer it could not make, and one wrapping
// ErrConsumerLost per consumer it made anew.
func (s *Set) Reapply(ctx context.Context) []error {
	var errs []error
	for _, sub := range s.Subscriptions() {
		s.mu.Lock()
		limited := s.limited[types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}]
		s.mu.Unlock()
		if limited {
			continue // it has no consumer
		}
		obs, lost := s.apply(ctx, sub)
		for _, err := range []error{lost, obs.ConsumerError} {
			if err != nil {
				errs = append(errs, fmt.Errorf("Subscription %s/%s: %w", sub.Namespace, sub.Name, err))
			}
		}
	}
	return errs
}

// MakeConsumers is Reapply for an Opener: it returns the errors of the
// consumers it could not make, and logs to log each consumer made anew
// (ErrConsumerLost).
func (s *Set) MakeConsumers(ctx context.Context, log *slog.Logger) []error {
	var failed []error
	for _, err := range s.Reapply(ctx) {
		if errors.Is(err, ErrConsumerLost) {
			log.Error("the events that waited for a Subscription are lost", "error", err)
			continue
		}
		failed = append(failed, err)
	}
	return failed
}

// Subscriptions returns the Subscriptions served, by namespace and name.
// They must not be changed.
func (s *Set) Subscriptions() []*v1alpha2.Subscription {
	s.mu.Lock()
	out := make([]*v1alpha2.Subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		out = append(out, sub)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *v1alpha2.Subscription) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// ListSubscriptions returns copies of the Subscriptions served, for the
// publisher's /{app}/v1/events/subscribed (publisher.SubscriptionLister).
func (s *Set) ListSubscriptions(context.Context) ([]v1alpha2.Subscription, error) {
	subs := s.Subscriptions()
	out := make([]v1alpha2.Subscription, len(subs))
	for i, sub := range subs {
		out[i] = *sub
	}
	return out, nil
}
