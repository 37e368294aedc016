package function

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/fairqueue"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "function"

// sinkIndex indexes Subscriptions by the name of the Service their sink
// points at, in their own namespace.
const sinkIndex = "kfn.sink.service"

// scaleTargetIndex indexes HorizontalPodAutoscalers by the name of the
// Function they scale through its scale subresource, in their namespace.
const scaleTargetIndex = "kfn.scaletarget.function"

// AddToScheme registers every type the controller reads or writes:
// client-go's, kfn's Function and Subscription, and KEDA's ScaledObject.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, v1alpha2.AddToScheme, eventingv1alpha2.AddToScheme, kedav1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return fmt.Errorf("register types: %w", err)
		}
	}
	return nil
}

// CacheOptions restricts the manager's cache of the kinds the controller
// makes (and of Pods) to objects labelled as kfn's, and drops managed
// fields from everything cached, which bounds the controller's memory.
// HorizontalPodAutoscalers are all cached: one a user points at a Function
// (kubectl autoscale function) decides its replicas, as in Kyma.
func CacheOptions() cache.Options {
	by := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{v1alpha2.LabelManagedBy: v1alpha2.LabelManagedByValue})}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}:  by,
			&appsv1.Deployment{}: by,
			&corev1.Service{}:    by,
			&corev1.Pod{}:        by,
		},
	}
}

// NewReconciler returns a Reconciler for mgr, whose scheme must include
// AddToScheme's types and whose cache should use CacheOptions. It checks
// once whether KEDA is installed. The error wraps ErrInvalidConfig for a
// bad cfg.
func NewReconciler(mgr ctrl.Manager, cfg Config) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("create discovery client: %w", err)
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		live:     mgr.GetAPIReader(),
		cfg:      cfg,
		recorder: mgr.GetEventRecorder("kfn-" + ControllerName + "-controller"),
		git: &gitResolver{secrets: mgr.GetAPIReader(), interval: cfg.GitPollInterval, knownHosts: cfg.Resources.GitKnownHosts,
			egress: gitEgress(cfg.GitEgress, mgr.GetConfig().Host), entries: map[types.NamespacedName]gitEntry{}},
		lastForce: map[types.NamespacedName]forcedApply{},
		keda: &kedaDetector{
			disc:     disc,
			interval: cfg.KEDACheckInterval,
			log:      mgr.GetLogger().WithName("keda"),
			events:   make(chan event.GenericEvent, 1024),
		},
	}
	present, err := r.keda.check()
	if err != nil {
		return nil, err
	}
	r.keda.present.Store(present)
	if cfg.WarmPool {
		if r.pool, err = pool.New(mgr.GetClient(), mgr.GetCache(), pool.Config{Size: cfg.WarmPoolSize, Resources: cfg.Resources,
			MaxStandby: cfg.WarmPoolMaxStandby, Idle: cfg.WarmPoolIdle},
			pool.WithLogger(mgr.GetLogger().WithName("pool")), pool.WithMetrics(metrics.Registry)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if err := mgr.Add(r.pool); err != nil {
			return nil, fmt.Errorf("add the warm pool: %w", err)
		}
	}
	return r, nil
}

// SetupWithManager registers the controller: it watches Functions (spec
// changes), the children they own, their Pods, the Subscriptions whose sinks
// name them, autoscalers of the user's whose scale target is a Function,
// and KEDA's ScaledObjects once KEDA is installed.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &eventingv1alpha2.Subscription{}, sinkIndex, func(o client.Object) []string {
		sub, ok := o.(*eventingv1alpha2.Subscription)
		if !ok {
			return nil
		}
		sink, err := sub.ValidateSink()
		if err != nil {
			return nil
		}
		return []string{sink.Service}
	})
	if err != nil {
		return fmt.Errorf("index subscriptions by sink: %w", err)
	}
	err = mgr.GetFieldIndexer().IndexField(ctx, &autoscalingv2.HorizontalPodAutoscaler{}, scaleTargetIndex, func(o client.Object) []string {
		hpa, ok := o.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok || !TargetsFunction(hpa.Spec.ScaleTargetRef.APIVersion, hpa.Spec.ScaleTargetRef.Kind) {
			return nil
		}
		return []string{hpa.Spec.ScaleTargetRef.Name}
	})
	if err != nil {
		return fmt.Errorf("index horizontalpodautoscalers by function: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// The spec (generation), and the Function's own labels and
		// annotations, which choose its preset and ServiceAccount token;
		// not its status.
		For(&v1alpha2.Function{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, handler.EnqueueRequestsFromMapFunc(scaleTargetToFunction)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToFunction)).
		Watches(&eventingv1alpha2.Subscription{}, handler.EnqueueRequestsFromMapFunc(subscriptionToFunction)).
		WatchesRawSource(source.Channel(r.keda.events, &handler.EnqueueRequestForObject{})).
		// Namespaces in turn: one tenant's thousands of Functions do not hold
		// another's new one back until they are done.
		WithOptions(controller.Options{MaxConcurrentReconciles: r.cfg.Workers, NewQueue: fairqueue.Workqueue})
	if r.keda.installed() {
		b = b.Owns(&kedav1alpha1.ScaledObject{}).
			Watches(&kedav1alpha1.ScaledObject{}, handler.EnqueueRequestsFromMapFunc(scaleTargetToFunction))
		r.keda.watched.Store(true)
	}
	c, err := b.Build(r)
	if err != nil {
		return fmt.Errorf("build controller: %w", err)
	}
	r.keda.watch = func() error {
		if err := c.Watch(source.Kind(mgr.GetCache(), client.Object(&kedav1alpha1.ScaledObject{}),
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha2.Function{}, handler.OnlyControllerOwner()))); err != nil {
			return err
		}
		return c.Watch(source.Kind(mgr.GetCache(), client.Object(&kedav1alpha1.ScaledObject{}), handler.EnqueueRequestsFromMapFunc(scaleTargetToFunction)))
	}
	r.keda.list = func(ctx context.Context) ([]client.Object, error) {
		fns := &v1alpha2.FunctionList{}
		if err := mgr.GetClient().List(ctx, fns); err != nil {
			return nil, fmt.Errorf("list functions: %w", err)
		}
		out := make([]client.Object, len(fns.Items))
		for i := range fns.Items {
			out[i] = &fns.Items[i]
		}
		return out, nil
	}
	if err := mgr.Add(r.keda); err != nil {
		return fmt.Errorf("add KEDA detector: %w", err)
	}
	return nil
}

func podToFunction(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[v1alpha2.LabelFunctionName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// scaleTargetToFunction maps an autoscaler whose scale target is a
// Function (an HPA or a KEDA ScaledObject of the user's) to that Function.
func scaleTargetToFunction(_ context.Context, o client.Object) []reconcile.Request {
	var apiVersion, kind, name string
	switch a := o.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		apiVersion, kind, name = a.Spec.ScaleTargetRef.APIVersion, a.Spec.ScaleTargetRef.Kind, a.Spec.ScaleTargetRef.Name
	case *kedav1alpha1.ScaledObject:
		if a.Spec.ScaleTargetRef == nil {
			return nil
		}
		apiVersion, kind, name = a.Spec.ScaleTargetRef.APIVersion, a.Spec.ScaleTargetRef.Kind, a.Spec.ScaleTargetRef.Name
	}
	if name == "" || !TargetsFunction(apiVersion, kind) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

func subscriptionToFunction(_ context.Context, o client.Object) []reconcile.Request {
	sub, ok := o.(*eventingv1alpha2.Subscription)
	if !ok {
		return nil
	}
	sink, err := sub.ValidateSink()
	if err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: sink.Namespace, Name: sink.Service}}}
}

// gitEgress is p, refusing the API server's addresses when p denies
// nothing itself: its Service's (from the pod's environment) and
// apiServer's, the host the controller talks to when it is an address.
func gitEgress(p egress.Policy, apiServer string) egress.Policy {
	if p.Deny != nil {
		return p
	}
	var own netip.AddrPort
	if u, err := url.Parse(apiServer); err == nil {
		port := u.Port()
		if port == "" {
			port = "443"
		}
		own, _ = netip.ParseAddrPort(net.JoinHostPort(u.Hostname(), port))
	}
	p.Deny = egress.DenyAPIServer(egress.APIServerService(), own)
	return p
}
