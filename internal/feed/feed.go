package feed

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/internal/fairqueue"
)

// Targets serve Subscriptions in this process: *dispatcher.Dispatcher
// delivers their events, *activity.Scaler counts their backlog.
type Targets interface {
	// Upsert serves a Subscription; the error says why it cannot.
	Upsert(sub *v1alpha2.Subscription) error
	// Remove stops serving it.
	Remove(namespace, name string)
}

// DefaultFeederName names the Feeder's controller unless Feeder.Name does.
const DefaultFeederName = "subscription-dispatch"

// ErrNotSynced is returned by [Feeder.Prime] when the cache could not sync.
var ErrNotSynced = errors.New("subscription cache not synced")

// Feeder tells the Targets of this process (the event bridge's dispatcher,
// the scaler's core) which Subscriptions to serve. It runs in every replica
// (no leader election): every replica's dispatcher shares the work, every
// scaler replica answers KEDA on its own.
type Feeder struct {
	// Client reads Subscriptions (the manager's cached client).
	Client client.Reader
	// Targets is what serves them.
	Targets Targets
	// Name names the controller in logs and metrics; DefaultFeederName
	// when empty.
	Name string
}

// SetupWithManager registers the feeder with mgr as a controller of
// Subscriptions.
func (f *Feeder) SetupWithManager(mgr ctrl.Manager) error {
	if f.Client == nil || f.Targets == nil {
		return errors.New("subscription feeder: Client and Targets are required")
	}
	name := f.Name
	if name == "" {
		name = DefaultFeederName
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&v1alpha2.Subscription{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), NewQueue: fairqueue.Workqueue}). // namespaces in turn
		Complete(f)
	if err != nil {
		return fmt.Errorf("set up the subscription feeder %s: %w", name, err)
	}
	return nil
}

// Reconcile serves a Subscription that exists and is valid, and stops
// serving it otherwise. A Subscription the dispatcher refuses is not an
// error to retry: its status (written by the Reconciler) says why.
func (f *Feeder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sub v1alpha2.Subscription
	if err := f.Client.Get(ctx, req.NamespacedName, &sub); err != nil {
		if apierrors.IsNotFound(err) {
			f.Targets.Remove(req.Namespace, req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get subscription %s: %w", req.NamespacedName, err)
	}
	f.feed(ctx, &sub)
	return reconcile.Result{}, nil
}

// feed serves or stops serving one Subscription.
func (f *Feeder) feed(ctx context.Context, sub *v1alpha2.Subscription) {
	if !sub.DeletionTimestamp.IsZero() {
		f.Targets.Remove(sub.Namespace, sub.Name)
		return
	}
	if err := f.Targets.Upsert(sub); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("not serving an invalid Subscription", "namespace", sub.Namespace, "subscription", sub.Name, "reason", err.Error())
	}
}

// Prime waits for c (the manager's cache, which must be starting) to sync
// its Subscriptions, then feeds every Subscription in it at once, so that
// the Targets know them all before they answer (a scaler that does not
// know a Function's Subscriptions yet would call it idle). The controller
// goes on feeding changes; feeding a Subscription twice is harmless. The
// error wraps ErrNotSynced when ctx ended first, or says why the
// Subscriptions could not be listed.
func (f *Feeder) Prime(ctx context.Context, c cache.Cache) error {
	if _, err := c.GetInformer(ctx, &v1alpha2.Subscription{}); err != nil {
		return fmt.Errorf("subscription informer: %w", err)
	}
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("%w: %w", ErrNotSynced, ctx.Err())
	}
	var list v1alpha2.SubscriptionList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("list subscriptions: %w", err)
	}
	for i := range list.Items {
		f.feed(ctx, &list.Items[i])
	}
	return nil
}

// Lister lists Subscriptions for the publisher's subscribed endpoint.
type Lister struct {
	// Client reads Subscriptions (the manager's cached client).
	Client client.Reader
}

// ListSubscriptions returns the Subscriptions of every namespace, the
// cache's own (not copies: a copy of every Subscription per list cost the
// event bridge their whole size each time): the caller must not change
// them.
func (l Lister) ListSubscriptions(ctx context.Context) ([]v1alpha2.Subscription, error) {
	var list v1alpha2.SubscriptionList
	if err := l.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return list.Items, nil
}
