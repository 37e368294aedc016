package kube

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/scaler"
)

// Core is what the Feeder drives; *scaler.Scaler implements it.
type Core interface {
	// SetSubscription adds or replaces a Subscription's Binding.
	SetSubscription(b scaler.Binding)
	// DeleteSubscription forgets a Subscription.
	DeleteSubscription(sub types.NamespacedName)
}

var _ Core = (*scaler.Scaler)(nil)

// ErrNotSynced is returned by [Feeder.Prime] when the cache could not sync.
var ErrNotSynced = errors.New("subscription cache not synced")

// Feeder tells the core about every Subscription. It runs in every scaler
// replica (no leader election): each replica answers KEDA on its own.
type Feeder struct {
	// Client reads Subscriptions (the manager's cached client).
	Client client.Reader
	// Core is the scaler core.
	Core Core
}

// SetupWithManager registers the Feeder with mgr as a controller of
// Subscriptions, named "scaler-subscriptions".
func (f *Feeder) SetupWithManager(mgr ctrl.Manager) error {
	if f.Client == nil || f.Core == nil {
		return errors.New("scaler feeder: Client and Core are required")
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("scaler-subscriptions").
		For(&eventingv1alpha2.Subscription{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(f)
	if err != nil {
		return fmt.Errorf("set up the scaler's subscription feeder: %w", err)
	}
	return nil
}

// Reconcile gives the core the Binding of a Subscription that exists and is
// valid, and makes it forget one that is gone, being deleted or invalid (an
// invalid Subscription has no consumer and feeds no Function; the event
// bridge writes why into its status, the Feeder only logs it).
func (f *Feeder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sub eventingv1alpha2.Subscription
	if err := f.Client.Get(ctx, req.NamespacedName, &sub); err != nil {
		if client.IgnoreNotFound(err) == nil {
			f.Core.DeleteSubscription(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get subscription %s: %w", req.NamespacedName, err)
	}
	f.feed(ctx, &sub)
	return reconcile.Result{}, nil
}

// feed sets or deletes one Subscription in the core.
func (f *Feeder) feed(ctx context.Context, sub *eventingv1alpha2.Subscription) {
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
	if !sub.DeletionTimestamp.IsZero() {
		f.Core.DeleteSubscription(key)
		return
	}
	b, err := scaler.BindingFor(sub)
	if err != nil {
		f.Core.DeleteSubscription(key)
		ctrl.LoggerFrom(ctx).Info("ignoring an invalid Subscription", "namespace", sub.Namespace, "subscription", sub.Name, "reason", err.Error())
		return
	}
	f.Core.SetSubscription(b)
}

// Prime waits for c (the manager's cache, which must be starting) to sync
// its Subscriptions, then feeds every Subscription in it at once, so that
// the core knows them all before its first refresh answers KEDA (a
// Function whose Subscriptions are not yet known would look idle). The
// controller goes on feeding changes; feeding a Subscription twice is
// harmless. The error wraps ErrNotSynced when ctx ended first, or says
// why the Subscriptions could not be listed.
func (f *Feeder) Prime(ctx context.Context, c cache.Cache) error {
	if _, err := c.GetInformer(ctx, &eventingv1alpha2.Subscription{}); err != nil {
		return fmt.Errorf("subscription informer: %w", err)
	}
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("%w: %w", ErrNotSynced, ctx.Err())
	}
	var list eventingv1alpha2.SubscriptionList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("list subscriptions: %w", err)
	}
	for i := range list.Items {
		f.feed(ctx, &list.Items[i])
	}
	return nil
}
