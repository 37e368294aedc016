package subscription

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/internal/fairqueue"
)

// Finalizer is set on every Subscription so that its consumer is deleted
// even if the Subscription is deleted while the event bridge is down.
const Finalizer = "eventing.kfn.dev/jetstream-consumer"

// DefaultResync is how often a Subscription is reconciled without a change,
// which recreates a consumer that NATS lost.
const DefaultResync = 30 * time.Second

// ErrServiceNotFound is wrapped when the sink's Service does not exist.
var ErrServiceNotFound = errors.New("sink Service not found")

// Reconciler reconciles Subscriptions into JetStream consumers and status.
// Run one at a time (leader election).
type Reconciler struct {
	// Client reads Subscriptions and Services and writes status.
	Client client.Client
	// Applier makes the consumers.
	Applier Applier
	// Resync is the period of reconciles without a change; DefaultResync
	// when zero.
	Resync time.Duration
	// Now returns the time for conditions; time.Now when nil.
	Now func() time.Time
	// Metrics, when set, is where SetupWithManager registers the
	// reconciler's metrics (kfn_eventbridge_consumers_lost_total, lost
	// consumers by Subscription); nil counts nothing.
	Metrics prometheus.Registerer

	metrics *metrics

	requeue chan event.GenericEvent

	// lost are the Subscriptions whose lost consumer their status does
	// not tell yet: a loss is seen once (the next reconcile finds the
	// consumer made anew), so it is kept until a status write says it.
	mu   sync.Mutex
	lost map[types.NamespacedName]bool
	// waiting are the Subscriptions that wait for room in the event
	// stream (ErrStreamReserve): a consumer deleted in any namespace
	// requeues them.
	waiting map[types.NamespacedName]bool
}

// SetupWithManager registers the reconciler with mgr: it watches
// Subscriptions and the Services their sinks name. It registers the
// metrics with Metrics, when set, and fails when they are registered
// already.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Metrics != nil {
		m, err := newMetrics(r.Metrics)
		if err != nil {
			return err
		}
		r.metrics = m
	}
	r.requeue = make(chan event.GenericEvent, 1024)
	return ctrl.NewControllerManagedBy(mgr).
		Named("subscription").
		For(&v1alpha2.Subscription{}, builder.WithPredicates()).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.subscriptionsOfService)).
		WatchesRawSource(source.Channel(r.requeue, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{RateLimiter: retryLimiter(), NewQueue: fairqueue.Workqueue}). // namespaces in turn
		Complete(r)
}

// MaxRetryDelay bounds how long a Subscription whose reconcile failed
// waits for its next one. controller-runtime's default doubles the wait
// from 5 ms up to 1,000 s: a Subscription whose reconciles failed all
// through a NATS outage (no stream, no consumer) had doubled it a dozen
// times, so that after NATS came back its consumer, and its events, waited
// for seconds to minutes more, longer the longer the outage.
const MaxRetryDelay = 5 * time.Second

// retryLimiter is controller-runtime's default rate limiter with its
// per-Subscription wait held to MaxRetryDelay: 10 retries a second for
// all Subscriptions together (a burst of 100), as by default.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// RequeueAll reconciles every Subscription soon; call it when NATS
// reconnects, so consumers a new NATS lacks are recreated at once. It
// never blocks; requests over the buffer wait for the next resync.
func (r *Reconciler) RequeueAll(ctx context.Context) error {
	var list v1alpha2.SubscriptionList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list subscriptions: %w", err)
	}
	for i := range list.Items {
		select {
		case r.requeue <- event.GenericEvent{Object: &list.Items[i]}:
		default:
		}
	}
	return nil
}

// MakeConsumers makes the consumer of every Subscription not being
// deleted at once, as its reconcile would (a consumer made anew although
// the status named one is a loss, told by the next status write), for an
// Opener: call it in the leader. It returns an error per consumer it
// could not make.
func (r *Reconciler) MakeConsumers(ctx context.Context) []error {
	var list v1alpha2.SubscriptionList
	if err := r.Client.List(ctx, &list); err != nil {
		return []error{fmt.Errorf("list subscriptions: %w", err)}
	}
	var errs []error
	for i := range list.Items {
		sub := &list.Items[i]
		if !sub.DeletionTimestamp.IsZero() {
			continue
		}
		if obs := r.observe(ctx, sub); obs.ConsumerError != nil {
			errs = append(errs, fmt.Errorf("Subscription %s/%s: %w", sub.Namespace, sub.Name, obs.ConsumerError))
		}
	}
	return errs
}

func (r *Reconciler) subscriptionsOfService(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha2.SubscriptionList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list subscriptions for a Service change", "namespace", o.GetNamespace(), "service", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if sink, err := v1alpha2.ParseSink(list.Items[i].Spec.Sink); err == nil && sink.Service == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile brings one Subscription's consumer and status in line.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sub v1alpha2.Subscription
	if err := r.Client.Get(ctx, req.NamespacedName, &sub); err != nil {
		if apierrors.IsNotFound(err) {
			r.wait(&v1alpha2.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}, false)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !sub.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.finalize(ctx, &sub)
	}
	if controllerutil.AddFinalizer(&sub, Finalizer) {
		if err := r.Client.Update(ctx, &sub); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	obs := r.observe(ctx, &sub)
	if err := r.writeStatus(ctx, &sub, obs); err != nil {
		return reconcile.Result{}, err
	}
	if obs.Lost {
		r.mu.Lock()
		delete(r.lost, req.NamespacedName)
		r.mu.Unlock()
	}
	if obs.ConsumerError != nil {
		return reconcile.Result{}, obs.ConsumerError // retried with backoff
	}
	return reconcile.Result{RequeueAfter: r.resync()}, nil
}

func (r *Reconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultResync
}

// observe validates the Subscription, with the cluster's check that its
// sink's Service exists, and makes its consumer exist (see Applier.Apply).
// A consumer made anew although the status named one was lost by NATS,
// with the events that waited in it: that is logged as an error, counted,
// and shown in the status (Observation.Lost).
func (r *Reconciler) observe(ctx context.Context, sub *v1alpha2.Subscription) Observation {
	if limited, obs := r.limit(ctx, sub); limited {
		return obs
	}
	obs := r.Applier.Apply(ctx, sub, r.serviceExists)
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if obs.Created && hadConsumer(sub) {
		if r.lost == nil {
			r.lost = map[types.NamespacedName]bool{}
		}
		r.lost[key] = true
		r.metrics.consumerLost(sub.Namespace, sub.Name)
		ctrl.LoggerFrom(ctx).Error(errConsumerLost, "the events that waited for the Subscription are lost; its consumer was made anew",
			"consumer", obs.Consumer, "stream", r.Applier.Streams.EventStream)
	}
	obs.Lost = r.lost[key]
	return obs
}

// limit reports whether sub may not have a consumer now, and then its
// Observation: over its namespace's limits (overLimits), it has none (one
// its status names, made before the limits were lowered, is deleted with
// the events waiting in it, as the status says); while its namespace's
// Subscriptions cannot be listed, its consumer is left as it is and the
// reconcile retried.
func (r *Reconciler) limit(ctx context.Context, sub *v1alpha2.Subscription) (bool, Observation) {
	over, err := r.overLimits(ctx, sub)
	r.wait(sub, errors.Is(over, ErrStreamReserve))
	switch {
	case err != nil:
		return true, Observation{ConsumerError: err}
	case over == nil:
		return false, Observation{}
	}
	obs := Observation{SpecError: r.Applier.Check(ctx, sub, r.serviceExists), Limited: over}
	if hadConsumer(sub) {
		obs.ConsumerError = r.Applier.Delete(ctx, sub.Namespace, sub.Name)
		if obs.ConsumerError == nil {
			r.requeueWaiting()
		}
	}
	return true, obs
}

// wait notes whether sub waits for room in the event stream.
func (r *Reconciler) wait(sub *v1alpha2.Subscription, waits bool) {
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case waits && r.waiting == nil:
		r.waiting = map[types.NamespacedName]bool{key: true}
	case waits:
		r.waiting[key] = true
	default:
		delete(r.waiting, key)
	}
}

// wakeWaiting is how many of the Subscriptions waiting for room one
// deleted consumer requeues: one of them can take its place, and a tenant
// deleting Subscriptions in a loop must not have every waiting one
// reconciled each time.
const wakeWaiting = 16

// requeueWaiting reconciles soon some of the Subscriptions that wait for
// room in the event stream (wakeWaiting of them, any): a consumer was
// deleted. It never blocks; requests over the buffer, and the others,
// wait for their resync.
func (r *Reconciler) requeueWaiting() {
	if r.requeue == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for key := range r.waiting {
		if n++; n > wakeWaiting {
			return
		}
		select {
		case r.requeue <- event.GenericEvent{Object: &v1alpha2.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		default:
			return
		}
	}
}

// errConsumerLost is what the log says when NATS lost a consumer.
var errConsumerLost = errors.New("NATS lost the Subscription's consumer, with its stream or alone")

// hadConsumer reports whether the Subscription's status names a consumer:
// kfn made one, and only deleting the Subscription removes it.
func hadConsumer(sub *v1alpha2.Subscription) bool {
	for _, t := range sub.Status.Backend.Types {
		if t.ConsumerName != "" {
			return true
		}
	}
	return false
}

// serviceExists checks what the CRD and the Subscription cannot: that the
// sink's Service exists.
func (r *Reconciler) serviceExists(ctx context.Context, _ *v1alpha2.Subscription, sink v1alpha2.Sink) error {
	var svc corev1.Service
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: sink.Namespace, Name: sink.Service}, &svc)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("spec.sink: %w: Service %q does not exist in namespace %q", ErrServiceNotFound, sink.Service, sink.Namespace)
	}
	if err != nil {
		return fmt.Errorf("spec.sink: look up Service %s/%s: %w", sink.Namespace, sink.Service, err)
	}
	return nil
}

// writeStatus writes the status computed from obs, only if it changed.
func (r *Reconciler) writeStatus(ctx context.Context, sub *v1alpha2.Subscription, obs Observation) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	status := Status(sub, obs, metav1.NewTime(now().Truncate(time.Second)))
	if apiequality.Semantic.DeepEqual(status, sub.Status) {
		return nil
	}
	// An update, not a merge patch: a patch leaves out ready: false when
	// the stored status is empty, and the API server requires it.
	sub.Status = status
	if err := r.Client.Status().Update(ctx, sub); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// finalize deletes the consumer of a deleted Subscription, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, sub *v1alpha2.Subscription) error {
	if !controllerutil.ContainsFinalizer(sub, Finalizer) {
		return nil
	}
	if err := r.Applier.Delete(ctx, sub.Namespace, sub.Name); err != nil {
		return err
	}
	r.wait(sub, false)
	controllerutil.RemoveFinalizer(sub, Finalizer)
	if err := r.Client.Update(ctx, sub); err != nil {
		return fmt.Errorf("remove finalizer: %w", client.IgnoreNotFound(err))
	}
	r.requeueNamespace(ctx, sub.Namespace)
	r.requeueWaiting()
	return nil
}

// requeueNamespace reconciles the namespace's Subscriptions soon: the one
// deleted left a place within the namespace's limits (overLimits) to the
// next in line. It never blocks; requests over the buffer wait for the
// next resync.
func (r *Reconciler) requeueNamespace(ctx context.Context, namespace string) {
	if r.requeue == nil {
		return
	}
	var list v1alpha2.SubscriptionList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Subscriptions of a namespace, whose next in line waits for the resync", "namespace", namespace)
		return
	}
	for i := range list.Items {
		select {
		case r.requeue <- event.GenericEvent{Object: &list.Items[i]}:
		default:
			return
		}
	}
}
