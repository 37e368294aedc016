package function

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// AnnotationApplied is the hash of the configuration the controller last
// applied to a child. When the desired configuration hashes the same, the
// apply is skipped (except once per Config.Resync), which keeps a steady
// state free of writes.
const AnnotationApplied = "kfn.dev/applied-hash"

// Reconciler reconciles Functions. Create it with NewReconciler and
// register it with SetupWithManager.
type Reconciler struct {
	client client.Client
	// live reads from the API server, not the cache: for an object of
	// someone else's the cache may not have seen yet (ownedForApply).
	live     client.Reader
	cfg      Config
	recorder events.EventRecorder
	keda     *kedaDetector
	git      *gitResolver
	// pool is the warm pool (cfg.WarmPoolSize), nil when off.
	pool *pool.Pool

	mu        sync.Mutex
	lastForce map[types.NamespacedName]forcedApply
}

type forcedApply struct {
	uid types.UID
	at  time.Time
}

// Pool is the reconciler's warm pool, nil when Config.WarmPool is off.
func (r *Reconciler) Pool() *pool.Pool { return r.pool }

// Reconcile brings one Function's children in line with its spec and
// writes its status once, when it changed. Errors are returned to
// controller-runtime, which logs them and retries with backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fn := &v1alpha2.Function{}
	if err := r.client.Get(ctx, req.NamespacedName, fn); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, r.deleteOrphans(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, fmt.Errorf("get function: %w", err)
	}
	if !fn.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // owner references delete the children
	}
	st := fn.Status.DeepCopy()
	res, err := r.reconcile(ctx, fn, st)
	st.MirrorBuildReady(fn.Generation)
	if werr := r.writeStatus(ctx, fn, st); werr != nil {
		if apierrors.IsConflict(werr) && err == nil {
			// The cached Function was stale: reconcile again from the newer one.
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, errors.Join(err, werr)
	}
	return res, err
}

// reconcile configures the Function, chooses where its pods take their
// dependencies from, then applies its children. It
// returns an error only for what a retry may fix; a Function that cannot
// run as written gets a False condition and no error.
func (r *Reconciler) reconcile(ctx context.Context, fn *v1alpha2.Function, st *v1alpha2.FunctionStatus) (ctrl.Result, error) {
	d, res, err := r.configure(ctx, fn, st)
	if d == nil {
		return res, err
	}
	if err := r.chooseDependencySource(ctx, d); err != nil {
		return ctrl.Result{}, err
	}
	return r.applyChildren(ctx, fn, d, st)
}

// desired is what configure decided for a Function: its plan, with the
// autoscaler chosen, and what ConfigurationReady says once the source is
// stored.
type desired struct {
	plan plan.Plan
	// reason and message of ConfigurationReady True, then the notes.
	reason  v1alpha2.ConditionReason
	message string
	notes   []string
	// requeue is when to reconcile again without a change.
	requeue time.Duration
}

// configure validates fn, resolves a Git source, plans the Function and
// chooses who owns its replicas, recording in st what it learns. A nil
// desired means there is nothing to apply: the Function cannot run as
// written (ConfigurationReady False, no error) or a retry may fix it (the
// error).
func (r *Reconciler) configure(ctx context.Context, fn *v1alpha2.Function, st *v1alpha2.FunctionStatus) (*desired, ctrl.Result, error) {
	st.ObservedGeneration = fn.Generation
	st.Runtime = fn.Spec.Runtime
	if problems := fn.Validate(); len(problems) > 0 {
		notConfigured(st, v1alpha2.ReasonInvalidFunctionSpec, v1alpha2.InvalidSpecMessage(problems))
		return nil, ctrl.Result{}, nil
	}
	d := &desired{reason: v1alpha2.ReasonFunctionSpecValidated, message: fmt.Sprintf("Function %s is valid", fn.Name), requeue: r.cfg.Resync}
	if dup := fn.DuplicateEnv(); len(dup) > 0 {
		d.notes = append(d.notes, fmt.Sprintf("spec.env defines %s more than once: the last definition is used", strings.Join(dup, ", ")))
	}
	planned := fn
	if fn.Spec.Source.GitRepository != nil {
		if planned = r.resolveSource(ctx, fn, st, d); planned == nil {
			return nil, ctrl.Result{RequeueAfter: d.requeue}, nil
		}
	}
	p, err := plan.For(planned, r.cfg.Plan)
	if err != nil {
		notConfigured(st, v1alpha2.ReasonInvalidFunctionSpec, err.Error())
		return nil, ctrl.Result{}, nil
	}
	st.RuntimeImage = p.Image
	st.FunctionResourceProfile = p.Profile
	st.PodSelector = labels.SelectorFromSet(p.Selector).String()
	d.plan = p
	d.notes = append(d.notes, p.Notes...)
	d, res, err := r.chooseAutoscaler(ctx, fn, st, d)
	if d == nil {
		return nil, res, err
	}
	if r.pool != nil {
		// Why the warm pool cannot serve a Function that scales to zero
		// is for its user to know: the first event waits for a new pod.
		if err := r.pool.Observe(d.plan); err != nil && d.plan.Scaling.ScalesToZero() {
			d.notes = append(d.notes, err.Error()+": it wakes from zero on a new pod")
		} else if why := r.pool.ClaimFailure(client.ObjectKeyFromObject(fn)); err == nil && why != "" {
			d.notes = append(d.notes, "the warm pool could not serve its last wake from zero ("+why+"): it woke on a new pod")
		}
	}
	return d, ctrl.Result{}, nil
}

// resolveSource resolves a Git Function's reference to a commit, records
// it in st and d, and returns the Function to plan, whose status names
// that commit; nil when the reference cannot be resolved
// (ConfigurationReady False, SourceUpdateFailed; d.requeue is when to try
// again).
func (r *Reconciler) resolveSource(ctx context.Context, fn *v1alpha2.Function, st *v1alpha2.FunctionStatus, d *desired) *v1alpha2.Function {
	g := fn.Spec.Source.GitRepository
	commit, next, err := r.git.resolve(ctx, fn)
	if err != nil {
		notConfigured(st, v1alpha2.ReasonSourceUpdateFailed, err.Error())
		d.requeue = next
		return nil
	}
	st.GitRepository = &v1alpha2.GitRepositoryStatus{URL: g.URL, Repository: g.Repository, Commit: commit}
	st.Commit, st.Repository = commit, g.Repository
	planned := fn.DeepCopy()
	planned.Status.GitRepository = st.GitRepository
	d.reason, d.message = v1alpha2.ReasonSourceUpdated, fmt.Sprintf("%s %q resolved to commit %s", g.URL, g.Reference, commit)
	d.requeue = min(d.requeue, next)
	return planned
}

// chooseAutoscaler records in d.plan who owns the Function's replicas: an
// autoscaler of the user's that targets the Function (then spec.replicas
// decides, as in Kyma), kfn's HPA or ScaledObject, or nobody.
func (r *Reconciler) chooseAutoscaler(ctx context.Context, fn *v1alpha2.Function, st *v1alpha2.FunctionStatus, d *desired) (*desired, ctrl.Result, error) {
	external, err := r.externalScaler(ctx, fn)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if external != "" {
		// kfn's own autoscaler would fight the one that sets spec.replicas
		// through the scale subresource.
		note := external + " scales the Function through spec.replicas"
		if fn.Spec.ScaleConfig != nil {
			note += "; spec.scaleConfig is ignored while it does"
		}
		d.notes = append(d.notes, note)
		d.plan.Scaling = d.plan.Scaling.Fixed()
	}
	kedaInstalled := r.keda.installed()
	subscribed := false
	if s := d.plan.Scaling; kedaInstalled && s.Autoscaled && s.MinReplicas >= 1 {
		if subscribed, err = r.subscribed(ctx, fn); err != nil {
			return nil, ctrl.Result{}, err
		}
	}
	if err := d.plan.SetAutoscaler(kedaInstalled, subscribed); err != nil {
		notConfigured(st, v1alpha2.ReasonInvalidFunctionSpec, err.Error())
		return nil, ctrl.Result{RequeueAfter: d.requeue}, nil
	}
	return d, ctrl.Result{}, nil
}

// applyChildren applies the children d plans, once per Resync even when
// they look unchanged, and sets ConfigurationReady (once the source is
// stored) and Running.
func (r *Reconciler) applyChildren(ctx context.Context, fn *v1alpha2.Function, d *desired, st *v1alpha2.FunctionStatus) (ctrl.Result, error) {
	p := d.plan
	key := client.ObjectKeyFromObject(fn)
	force := r.dueForce(key, fn.UID)
	stored, err := r.applyConfigMap(ctx, p, force)
	if err != nil {
		notConfigured(st, v1alpha2.ReasonConfigMapError, err.Error())
		return ctrl.Result{}, err
	}
	parts := append([]string{d.message, stored}, d.notes...)
	if p.Deprecation != "" {
		// First, as Kyma's message is: Busola shows such a Function as
		// WARNING.
		parts = append([]string{p.Deprecation}, parts...)
	}
	setCondition(st, Condition{Type: v1alpha2.ConditionConfigurationReady, Status: metav1.ConditionTrue, Reason: d.reason,
		Message: strings.Join(parts, "; ")})
	change, dep, err := r.applyDeployment(ctx, p, force)
	if err != nil {
		setCondition(st, Condition{Type: v1alpha2.ConditionRunning, Status: metav1.ConditionFalse, Reason: v1alpha2.ReasonDeploymentFailed, Message: err.Error()})
		return ctrl.Result{}, err
	}
	if err := r.applyService(ctx, p, force); err != nil {
		setCondition(st, Condition{Type: v1alpha2.ConditionRunning, Status: metav1.ConditionFalse, Reason: v1alpha2.ReasonServiceFailed, Message: err.Error()})
		return ctrl.Result{}, err
	}
	if err := r.applyAutoscaler(ctx, p, force); err != nil {
		// No condition of Kyma's fits an autoscaler that cannot be
		// written (an HPA of someone else's with the Function's name):
		// say it on the Function, where kubectl describe shows it.
		r.recorder.Eventf(fn, nil, corev1.EventTypeWarning, "AutoscalerFailed", "Reconcile", "%s", err.Error())
		return ctrl.Result{}, err
	}
	if force {
		r.forced(key, fn.UID)
	}
	running, err := r.running(ctx, p, dep, change)
	if err != nil {
		return ctrl.Result{}, err
	}
	setCondition(st, running)
	st.Replicas = dep.Status.Replicas
	return ctrl.Result{RequeueAfter: d.requeue}, nil
}

// running computes the Running condition from the Deployment and, when it
// is not ready, from the Function's pods.
func (r *Reconciler) running(ctx context.Context, p plan.Plan, dep *appsv1.Deployment, change RolloutChange) (Condition, error) {
	in := RunningInput{Deployment: dep, Change: change, MinReplicas: p.Scaling.FixedReplicas(), ScalesToZero: p.Scaling.ScalesToZero()}
	if c := RunningCondition(in); c.Status == metav1.ConditionTrue {
		return c, nil
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(p.Namespace), client.MatchingLabels(p.Selector)); err != nil {
		return Condition{}, fmt.Errorf("list pods: %w", err)
	}
	in.Pods = pods.Items
	return RunningCondition(in), nil
}

// setCondition sets c on st, for the generation st observes.
func setCondition(st *v1alpha2.FunctionStatus, c Condition) {
	st.SetCondition(c.Type, c.Status, c.Reason, c.Message, st.ObservedGeneration)
}

// notConfigured sets ConfigurationReady False with reason and message.
func notConfigured(st *v1alpha2.FunctionStatus, reason v1alpha2.ConditionReason, msg string) {
	setCondition(st, Condition{Type: v1alpha2.ConditionConfigurationReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}

// externalScaler names the autoscaler someone other than kfn pointed at
// the Function, a HorizontalPodAutoscaler or a KEDA ScaledObject whose
// scaleTargetRef is the Function, or returns "" when there is none.
func (r *Reconciler) externalScaler(ctx context.Context, fn *v1alpha2.Function) (string, error) {
	hpas := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := r.client.List(ctx, hpas, client.InNamespace(fn.Namespace), client.MatchingFields{scaleTargetIndex: fn.Name}); err != nil {
		return "", fmt.Errorf("list horizontalpodautoscalers: %w", err)
	}
	for i := range hpas.Items {
		if ref := metav1.GetControllerOf(&hpas.Items[i]); ref == nil || ref.UID != fn.UID {
			return "HorizontalPodAutoscaler " + hpas.Items[i].Name, nil
		}
	}
	if !r.keda.watching() {
		return "", nil
	}
	sos := &kedav1alpha1.ScaledObjectList{}
	if err := r.client.List(ctx, sos, client.InNamespace(fn.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("list scaledobjects: %w", err)
	}
	for i := range sos.Items {
		so := &sos.Items[i]
		t := so.Spec.ScaleTargetRef
		if t != nil && t.Name == fn.Name && TargetsFunction(t.APIVersion, t.Kind) {
			return "ScaledObject " + so.Name, nil
		}
	}
	return "", nil
}

// deleteOrphans deletes what kfn made for a Function that no longer
// exists. Owner references make the garbage collector do the same in a
// full cluster; this also covers objects whose owner reference was lost.
func (r *Reconciler) deleteOrphans(ctx context.Context, namespace, name string) error {
	sel := client.MatchingLabels{v1alpha2.LabelFunctionName: name, v1alpha2.LabelManagedBy: v1alpha2.LabelManagedByValue}
	lists := []client.ObjectList{&corev1.ConfigMapList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &autoscalingv2.HorizontalPodAutoscalerList{}}
	if r.keda.watching() {
		lists = append(lists, &kedav1alpha1.ScaledObjectList{})
	}
	var errs []error
	for _, l := range lists {
		if err := r.client.List(ctx, l, client.InNamespace(namespace), sel); err != nil {
			errs = append(errs, fmt.Errorf("list %T: %w", l, err))
			continue
		}
		items, err := metaItems(l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, obj := range items {
			if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Function" {
				errs = append(errs, r.delete(ctx, obj))
			}
		}
	}
	return errors.Join(errs...)
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, fmt.Errorf("read %T: %w", l, err)
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
	}
	return out, nil
}

// subscribed reports whether a Subscription's sink is the Function's Service.
func (r *Reconciler) subscribed(ctx context.Context, fn *v1alpha2.Function) (bool, error) {
	subs := &eventingv1alpha2.SubscriptionList{}
	if err := r.client.List(ctx, subs, client.InNamespace(fn.Namespace), client.MatchingFields{sinkIndex: fn.Name}); err != nil {
		return false, fmt.Errorf("list subscriptions: %w", err)
	}
	return len(subs.Items) > 0, nil
}

func (r *Reconciler) writeStatus(ctx context.Context, fn *v1alpha2.Function, st *v1alpha2.FunctionStatus) error {
	if apiequality.Semantic.DeepEqual(fn.Status, *st) {
		return nil
	}
	before := fn.Status.Conditions
	orig := fn.DeepCopy()
	fn.Status = *st
	// The resourceVersion in the patch makes a write based on a stale
	// cache fail with a conflict instead of overwriting newer status.
	if err := r.client.Status().Patch(ctx, fn, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	for _, e := range Transitions(before, st.Conditions) {
		r.recorder.Eventf(fn, nil, e.Type, e.Reason, "Reconcile", "%s", e.Message)
	}
	return nil
}

// dueForce reports whether the Function's children should be applied even
// when their hashes match, once per Resync, to repair changes made by others.
func (r *Reconciler) dueForce(key types.NamespacedName, uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.lastForce[key]
	return !ok || last.uid != uid || time.Since(last.at) >= r.cfg.Resync
}

func (r *Reconciler) forced(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastForce[key] = forcedApply{uid: uid, at: time.Now()}
}

// forget drops what the reconciler remembers of a deleted Function.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.lastForce, key)
	r.mu.Unlock()
	r.git.forget(key)
	if r.pool != nil {
		r.pool.Forget(key)
	}
}
