package subscription

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Set serves a whole set of Subscriptions read from manifests, without
// Kubernetes: the event bridge's -subscriptions mode and kfn dev. Each
// Subscription is applied to JetStream by the Applier and handed to every
// Target, as the Reconciler and the Feeder do in a cluster. It is safe for
// concurrent use.
type Set struct {
	applier Applier
	targets []Targets

	mu   sync.Mutex
	subs map[types.NamespacedName]*v1alpha2.Subscription
}

// NewSet returns an empty Set that applies with a and serves through
// targets.
func NewSet(a Applier, targets ...Targets) *Set {
	return &Set{applier: a, targets: targets, subs: map[types.NamespacedName]*v1alpha2.Subscription{}}
}

// Apply makes subs the Subscriptions served. Each one gets its consumer
// and is upserted to every target; one that cannot be served (an invalid
// spec, a consumer NATS refused, a target that refuses it) is left out,
// with its consumer deleted, and an error names it. One served before and
// not served now is removed from every target and its consumer deleted,
// with the events waiting in it, as when a Subscription is deleted in a
// cluster. It returns the errors, one per Subscription, "Subscription
// namespace/name: why".
func (s *Set) Apply(ctx context.Context, subs []*v1alpha2.Subscription) []error {
	var errs []error
	want := make(map[types.NamespacedName]*v1alpha2.Subscription, len(subs))
	for _, sub := range subs {
		key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
		if err := s.serve(ctx, sub); err != nil {
			errs = append(errs, fmt.Errorf("Subscription %s: %w", key, err))
			continue
		}
		want[key] = sub
	}
	s.mu.Lock()
	old := s.subs
	s.subs = want
	s.mu.Unlock()
	for key := range old {
		if _, ok := want[key]; ok {
			continue
		}
		if err := s.stop(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("Subscription %s: %w", key, err))
		}
	}
	return errs
}

// serve applies sub and hands it to every target; on an error it stops
// serving it.
func (s *Set) serve(ctx context.Context, sub *v1alpha2.Subscription) error {
	obs := s.applier.Apply(ctx, sub)
	err := obs.SpecError
	if err == nil {
		err = obs.ConsumerError
	}
	for _, t := range s.targets {
		if err != nil {
			break
		}
		err = t.Upsert(sub)
	}
	if err == nil {
		return nil
	}
	if serr := s.stop(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}); serr != nil {
		return fmt.Errorf("%w (and %w)", err, serr)
	}
	return err
}

// stop removes a Subscription from every target and deletes its consumer.
func (s *Set) stop(ctx context.Context, key types.NamespacedName) error {
	for _, t := range s.targets {
		t.Remove(key.Namespace, key.Name)
	}
	if err := s.applier.Delete(ctx, key.Namespace, key.Name); err != nil {
		return fmt.Errorf("delete its consumer: %w", err)
	}
	return nil
}

// Reapply makes the consumers of the Subscriptions served exist again, for
// a NATS server that restarted empty (recreate the streams first). It
// returns an error per consumer it could not make.
func (s *Set) Reapply(ctx context.Context) []error {
	var errs []error
	for _, sub := range s.Subscriptions() {
		if obs := s.applier.Apply(ctx, sub); obs.ConsumerError != nil {
			errs = append(errs, fmt.Errorf("Subscription %s/%s: %w", sub.Namespace, sub.Name, obs.ConsumerError))
		}
	}
	return errs
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

// SweepReplays runs the Set's Applier.SweepReplays until ctx ends.
func (s *Set) SweepReplays(ctx context.Context, interval time.Duration, log *slog.Logger) {
	s.applier.SweepReplays(ctx, interval, log)
}
