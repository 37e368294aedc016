package subscription

import (
	"context"
	"fmt"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Targets is the part of the dispatcher the Feeder drives;
// *dispatcher.Dispatcher implements it.
type Targets interface {
	// Upsert serves a Subscription; the error says why it cannot.
	Upsert(sub *v1alpha2.Subscription) error
	// Remove stops serving it.
	Remove(namespace, name string)
}

// Feeder tells the local dispatcher which Subscriptions to serve. It runs
// in every replica (no leader election), so every replica's dispatcher
// shares the work.
type Feeder struct {
	// Client reads Subscriptions.
	Client client.Reader
	// Targets is the dispatcher.
	Targets Targets
}

// SetupWithManager registers the feeder with mgr.
func (f *Feeder) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("subscription-dispatch").
		For(&v1alpha2.Subscription{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(f)
}

// Reconcile serves a Subscription that exists and is valid, and stops
// serving it otherwise. A Subscription the dispatcher refuses is not an
// error to retry: its status (written by the Reconciler) says why.
func (f *Feeder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sub v1alpha2.Subscription
	if err := f.Client.Get(ctx, req.NamespacedName, &sub); err != nil {
		if client.IgnoreNotFound(err) == nil {
			f.Targets.Remove(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !sub.DeletionTimestamp.IsZero() {
		f.Targets.Remove(sub.Namespace, sub.Name)
		return reconcile.Result{}, nil
	}
	if err := f.Targets.Upsert(&sub); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("not dispatching an invalid Subscription", "reason", err.Error())
	}
	return reconcile.Result{}, nil
}

// Lister lists Subscriptions for the publisher's subscribed endpoint.
type Lister struct {
	// Client reads Subscriptions (the manager's cached client).
	Client client.Reader
}

// ListSubscriptions returns the Subscriptions of every namespace.
func (l Lister) ListSubscriptions(ctx context.Context) ([]v1alpha2.Subscription, error) {
	var list v1alpha2.SubscriptionList
	if err := l.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return list.Items, nil
}
