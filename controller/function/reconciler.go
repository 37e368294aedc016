package function

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/plan"
)

// AnnotationApplied is the hash of the configuration the controller last
// applied to a child. When the desired configuration hashes the same, the
// apply is skipped (except once per Config.Resync), which keeps a steady
// state free of writes.
const AnnotationApplied = "kfn.dev/applied-hash"

// Reconciler reconciles Functions. Create it with NewReconciler and
// register it with SetupWithManager.
type Reconciler struct {
	client   client.Client
	secrets  client.Reader
	cfg      Config
	recorder events.EventRecorder
	keda     *kedaDetector
	git      *gitResolver

	mu        sync.Mutex
	lastForce map[types.NamespacedName]forcedApply
}

type forcedApply struct {
	uid types.UID
	at  time.Time
}

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

// reconcile computes the children, applies them and sets st. It returns
// an error only for what a retry may fix; a Function that cannot run as
// written gets a False condition and no error.
func (r *Reconciler) reconcile(ctx context.Context, fn *v1alpha2.Function, st *v1alpha2.FunctionStatus) (ctrl.Result, error) {
	gen := fn.Generation
	mark := func(c Condition) { st.SetCondition(c.Type, c.Status, c.Reason, c.Message, gen) }
	configuration := func(s metav1.ConditionStatus, reason v1alpha2.ConditionReason, msg string) {
		mark(Condition{Type: v1alpha2.ConditionConfigurationReady, Status: s, Reason: reason, Message: msg})
	}
	st.ObservedGeneration = gen
	st.Runtime = fn.Spec.Runtime

	if problems := fn.Validate(); len(problems) > 0 {
		configuration(metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec, v1alpha2.InvalidSpecMessage(problems))
		return ctrl.Result{}, nil
	}

	requeue := r.cfg.Resync
	planned := fn
	ready := v1alpha2.ReasonFunctionSpecValidated
	readyMsg := fmt.Sprintf("Function %s is valid", fn.Name)
	var notes []string
	if dup := fn.DuplicateEnv(); len(dup) > 0 {
		notes = append(notes, fmt.Sprintf("spec.env defines %s more than once: the last definition is used", strings.Join(dup, ", ")))
	}
	if g := fn.Spec.Source.GitRepository; g != nil {
		commit, next, err := r.git.resolve(ctx, fn)
		if err != nil {
			configuration(metav1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed, err.Error())
			return ctrl.Result{RequeueAfter: min(r.cfg.GitPollInterval, time.Minute)}, nil
		}
		st.GitRepository = &v1alpha2.GitRepositoryStatus{URL: g.URL, Repository: g.Repository, Commit: commit}
		st.Commit, st.Repository = commit, g.Repository
		planned = fn.DeepCopy()
		planned.Status.GitRepository = st.GitRepository
		ready, readyMsg = v1alpha2.ReasonSourceUpdated, fmt.Sprintf("%s %q resolved to commit %s", g.URL, g.Reference, commit)
		requeue = min(requeue, next)
	}

	p, err := plan.For(planned, r.cfg.Plan)
	if err != nil {
		configuration(metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec, err.Error())
		return ctrl.Result{}, nil
	}
	st.RuntimeImage = p.Image
	st.FunctionResourceProfile = p.Profile
	st.PodSelector = labels.SelectorFromSet(p.Selector).String()

	external, err := r.externalScaler(ctx, fn)
	if err != nil {
		return ctrl.Result{}, err
	}
	if external != "" {
		// As in Kyma: spec.replicas decides, and that autoscaler sets it
		// through the scale subresource; kfn's own autoscaler would fight it.
		note := external + " scales the Function through spec.replicas"
		if fn.Spec.ScaleConfig != nil {
			note += "; spec.scaleConfig is ignored while it does"
		}
		notes = append(notes, note)
		p.Scaling = p.Scaling.Fixed()
	}
	kedaInstalled := r.keda.installed()
	subscribed := false
	if kedaInstalled && p.Scaling.Autoscaled && p.Scaling.MinReplicas >= 1 {
		if subscribed, err = r.subscribed(ctx, fn); err != nil {
			return ctrl.Result{}, err
		}
	}
	autoscaler, err := ChooseAutoscaler(p.Scaling, kedaInstalled, subscribed)
	if err != nil {
		configuration(metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec, err.Error())
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	key := client.ObjectKeyFromObject(fn)
	force := r.dueForce(key, fn.UID)
	stored, err := r.applyConfigMap(ctx, p, force)
	if err != nil {
		configuration(metav1.ConditionFalse, v1alpha2.ReasonConfigMapError, err.Error())
		return ctrl.Result{}, err
	}
	configuration(metav1.ConditionTrue, ready, strings.Join(append([]string{readyMsg, stored}, notes...), "; "))
	change, dep, err := r.applyDeployment(ctx, fn, p, autoscaler, force)
	if err != nil {
		mark(Condition{Type: v1alpha2.ConditionRunning, Status: metav1.ConditionFalse, Reason: v1alpha2.ReasonDeploymentFailed, Message: err.Error()})
		return ctrl.Result{}, err
	}
	if err := r.applyService(ctx, p, force); err != nil {
		mark(Condition{Type: v1alpha2.ConditionRunning, Status: metav1.ConditionFalse, Reason: v1alpha2.ReasonServiceFailed, Message: err.Error()})
		return ctrl.Result{}, err
	}
	if err := r.applyAutoscaler(ctx, p, autoscaler, force); err != nil {
		// No condition of Kyma's fits an autoscaler that cannot be
		// written (an HPA of someone else's with the Function's name):
		// say it on the Function, where kubectl describe shows it.
		r.recorder.Eventf(fn, nil, corev1.EventTypeWarning, "AutoscalerFailed", "Reconcile", "%s", err.Error())
		return ctrl.Result{}, err
	}
	if force {
		r.forced(key, fn.UID)
	}

	in := RunningInput{Deployment: dep, Change: change, MinReplicas: FixedReplicas(p.Scaling), ScalesToZero: p.Scaling.ScalesToZero()}
	if running := RunningCondition(in); running.Status != metav1.ConditionTrue {
		pods := &corev1.PodList{}
		if err := r.client.List(ctx, pods, client.InNamespace(fn.Namespace), client.MatchingLabels(p.Selector)); err != nil {
			return ctrl.Result{}, fmt.Errorf("list pods: %w", err)
		}
		in.Pods = pods.Items
	}
	mark(RunningCondition(in))
	st.Replicas = dep.Status.Replicas
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// applyConfigMap writes the source ConfigMap of an inline Function (and
// deletes one a Git Function no longer needs). It returns where the pods
// find the source, for the ConfigurationReady message.
func (r *Reconciler) applyConfigMap(ctx context.Context, p plan.Plan, force bool) (string, error) {
	existing := &corev1.ConfigMap{}
	found, err := r.owned(ctx, p, existing)
	if err != nil {
		return "", err
	}
	ac := ConfigMap(p)
	if ac == nil { // Git: the pod fetches the source
		if found {
			if err := r.delete(ctx, existing); err != nil {
				return "", err
			}
		}
		return "the pods fetch the source at that commit and install its dependencies, if any", nil
	}
	var current client.Object
	if found {
		current = existing
	}
	if _, err := r.apply(ctx, ac, current, force); err != nil {
		return "", fmt.Errorf("apply configmap: %w", err)
	}
	msg := fmt.Sprintf("ConfigMap %s holds the source", p.Name)
	if p.Dependencies.Needed {
		msg += "; the pods install its dependencies before the function starts"
	}
	return msg, nil
}

func (r *Reconciler) applyDeployment(ctx context.Context, fn *v1alpha2.Function, p plan.Plan, autoscaler Autoscaler, force bool) (RolloutChange, *appsv1.Deployment, error) {
	existing := &appsv1.Deployment{}
	found, err := r.owned(ctx, p, existing)
	if err != nil {
		return RolloutUnchanged, nil, err
	}
	ac, err := Deployment(fn, p, r.cfg, autoscaler == AutoscalerNone, FixedReplicas(p.Scaling))
	if err != nil {
		return RolloutUnchanged, nil, fmt.Errorf("build deployment: %w", err)
	}
	var current client.Object
	if found {
		current = existing
	}
	applied, err := r.apply(ctx, ac, current, force)
	if err != nil {
		return RolloutUnchanged, nil, fmt.Errorf("apply deployment: %w", err)
	}
	if applied == nil {
		return RolloutUnchanged, existing, nil
	}
	dep := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, dep); err != nil {
		return RolloutUnchanged, nil, fmt.Errorf("decode applied deployment: %w", err)
	}
	switch {
	case !found:
		return RolloutCreated, dep, nil
	case dep.Generation != existing.Generation:
		return RolloutUpdated, dep, nil
	default:
		return RolloutUnchanged, dep, nil
	}
}

func (r *Reconciler) applyService(ctx context.Context, p plan.Plan, force bool) error {
	existing := &corev1.Service{}
	found, err := r.owned(ctx, p, existing)
	if err != nil {
		return err
	}
	var current client.Object
	if found {
		current = existing
	}
	if _, err := r.apply(ctx, Service(p), current, force); err != nil {
		return fmt.Errorf("apply service: %w", err)
	}
	return nil
}

func (r *Reconciler) applyAutoscaler(ctx context.Context, p plan.Plan, a Autoscaler, force bool) error {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	found, err := r.ownedOrForeign(ctx, p, hpa, a == AutoscalerHPA)
	if err != nil {
		return err
	}
	switch {
	case a == AutoscalerHPA:
		var current client.Object
		if found {
			current = hpa
		}
		if _, err := r.apply(ctx, HorizontalPodAutoscaler(p, r.cfg.HPACPUUtilization), current, force); err != nil {
			return fmt.Errorf("apply horizontalpodautoscaler: %w", err)
		}
	case found:
		if err := r.delete(ctx, hpa); err != nil {
			return err
		}
	}
	if !r.keda.watching() {
		return nil
	}
	so := &kedav1alpha1.ScaledObject{}
	found, err = r.ownedOrForeign(ctx, p, so, a == AutoscalerKEDA)
	if err != nil {
		return err
	}
	switch {
	case a == AutoscalerKEDA:
		var current client.Object
		if found {
			current = so
		}
		if _, err := r.apply(ctx, ScaledObject(p, r.cfg.ScalerAddress, r.cfg.ScalerAuthentication), current, force); err != nil {
			return fmt.Errorf("apply scaledobject: %w", err)
		}
	case found:
		return r.delete(ctx, so)
	}
	return nil
}

// owned reads the child named after the Function from the cache into obj.
// A child of an earlier Function of the same name (another UID) is
// deleted, and reported as not found, so that the new Function's child can
// be created (a Deployment's selector, which holds the UID, is immutable).
func (r *Reconciler) owned(ctx context.Context, p plan.Plan, obj client.Object) (bool, error) {
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get %T %s: %w", obj, p.Name, err)
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.UID == p.UID {
		return true, nil
	}
	if obj.GetLabels()[v1alpha2.LabelManagedBy] != v1alpha2.LabelManagedByValue {
		return false, fmt.Errorf("%T %s/%s exists and is not managed by kfn: delete or rename it", obj, p.Namespace, p.Name)
	}
	return false, r.delete(ctx, obj)
}

// ownedOrForeign is owned for an autoscaler, which a user may have made
// with the Function's name (kubectl autoscale function NAME): when kfn does
// not need its own (need false), such an object is left alone and reported
// as not found; when it does, owned's error names the conflict.
func (r *Reconciler) ownedOrForeign(ctx context.Context, p plan.Plan, obj client.Object, need bool) (bool, error) {
	if !need {
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("get %T %s: %w", obj, p.Name, err)
		}
		ref := metav1.GetControllerOf(obj)
		if (ref == nil || ref.UID != p.UID) && obj.GetLabels()[v1alpha2.LabelManagedBy] != v1alpha2.LabelManagedByValue {
			return false, nil
		}
	}
	return r.owned(ctx, p, obj)
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

// apply applies ac with server-side apply unless current (nil when there
// is none) already carries ac's hash and force is false. It returns the
// object the API server answered with, or nil when nothing was applied.
func (r *Reconciler) apply(ctx context.Context, ac any, current client.Object, force bool) (*unstructured.Unstructured, error) {
	if obj, ok := ac.(runtime.Object); ok {
		converted, err := applyConfiguration(obj)
		if err != nil {
			return nil, err
		}
		ac = converted
	}
	b, err := json.Marshal(ac)
	if err != nil {
		return nil, fmt.Errorf("encode apply configuration: %w", err)
	}
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:12])
	if current != nil && !force && current.GetAnnotations()[AnnotationApplied] == h {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("decode apply configuration: %w", err)
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationApplied] = h
	u.SetAnnotations(ann)
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(r.cfg.FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return u, nil
}

func (r *Reconciler) delete(ctx context.Context, obj client.Object) error {
	if err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
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
}
