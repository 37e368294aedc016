package function

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// applyConfigMap writes the source ConfigMap of an inline Function (and
// deletes one a Git Function no longer needs). It returns where the pods
// find the source, for the ConfigurationReady message.
func (r *Reconciler) applyConfigMap(ctx context.Context, p plan.Plan, force bool) (string, error) {
	existing := &corev1.ConfigMap{}
	ac := resources.ConfigMap(p)
	own := r.owned
	if ac != nil {
		own = r.ownedForApply
	}
	found, err := own(ctx, p, existing)
	if err != nil {
		return "", err
	}
	if ac == nil { // Git: the pod fetches the source
		if found {
			if err := r.delete(ctx, existing); err != nil {
				return "", err
			}
		}
		return "the pods fetch the source at that commit and install its dependencies, if any", nil
	}
	if _, err := r.apply(ctx, ac, present(found, existing), force); err != nil {
		return "", fmt.Errorf("apply configmap: %w", err)
	}
	msg := fmt.Sprintf("ConfigMap %s holds the source", p.Name)
	if p.Dependencies.Needed {
		msg += "; the pods install its dependencies before the function starts"
	}
	return msg, nil
}

// applyDeployment applies the Deployment and returns it as the API server
// answered (or as it was, when nothing was applied) with what the apply
// changed.
func (r *Reconciler) applyDeployment(ctx context.Context, p plan.Plan, force bool) (RolloutChange, *appsv1.Deployment, error) {
	existing := &appsv1.Deployment{}
	found, err := r.ownedForApply(ctx, p, existing)
	if err != nil {
		return RolloutUnchanged, nil, err
	}
	applied, err := r.apply(ctx, resources.Deployment(p, r.cfg.Resources), present(found, existing), force)
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
	found, err := r.ownedForApply(ctx, p, existing)
	if err != nil {
		return err
	}
	if _, err := r.apply(ctx, resources.Service(p), present(found, existing), force); err != nil {
		return fmt.Errorf("apply service: %w", err)
	}
	return nil
}

// applyAutoscaler applies kfn's autoscaler of the kind p.Autoscaler names
// and deletes kfn's of the other kind (ScaledObjects only while KEDA is
// watched).
func (r *Reconciler) applyAutoscaler(ctx context.Context, p plan.Plan, force bool) error {
	err := r.applyOrDelete(ctx, p, &autoscalingv2.HorizontalPodAutoscaler{}, p.Autoscaler == plan.AutoscalerHPA,
		resources.HorizontalPodAutoscaler(p, r.cfg.Resources), "horizontalpodautoscaler", force)
	if err != nil || !r.keda.watching() {
		return err
	}
	return r.applyOrDelete(ctx, p, &kedav1alpha1.ScaledObject{}, p.Autoscaler == plan.AutoscalerKEDA,
		resources.ScaledObject(p, r.cfg.Resources), "scaledobject", force)
}

// applyOrDelete applies ac (named what in errors) in obj's place when need,
// and otherwise deletes the object of obj's kind kfn made for the
// Function, if any; an autoscaler of the user's with the Function's name
// is left alone (ownedOrForeign).
func (r *Reconciler) applyOrDelete(ctx context.Context, p plan.Plan, obj client.Object, need bool, ac any, what string, force bool) error {
	found, err := r.ownedOrForeign(ctx, p, obj, need)
	if err != nil {
		return err
	}
	switch {
	case need:
		if _, err := r.apply(ctx, ac, present(found, obj), force); err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
	case found:
		return r.delete(ctx, obj)
	}
	return nil
}

// present is obj when found, else nil: the current object apply compares
// with.
func present(found bool, obj client.Object) client.Object {
	if found {
		return obj
	}
	return nil
}

// owned reads the child named after the Function from the cache into obj.
// A child of an earlier Function of the same name (another UID) is
// deleted, and reported as not found, so that the new Function's child can
// be created (a Deployment's selector, which holds the UID, is immutable).
func (r *Reconciler) owned(ctx context.Context, p plan.Plan, obj client.Object) (bool, error) {
	return r.claim(ctx, p, obj, r.client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, obj))
}

// ownedForApply is owned for a child kfn is about to apply. When the
// cache has no object of that name, the API server is asked too: the
// cache may not have seen an object of someone else's made a moment
// before the Function, and server-side apply, which kfn forces, would take
// it over. The extra read happens only while kfn's own child does not
// exist yet (its creation), never in a steady state.
func (r *Reconciler) ownedForApply(ctx context.Context, p plan.Plan, obj client.Object) (bool, error) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	err := r.client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.live.Get(ctx, key, obj)
	}
	return r.claim(ctx, p, obj, err)
}

// claim judges the child read into obj with the read's error getErr: kfn's
// own is found, an earlier Function's is deleted, anyone else's is an
// error that names it.
func (r *Reconciler) claim(ctx context.Context, p plan.Plan, obj client.Object, getErr error) (bool, error) {
	if getErr != nil {
		if apierrors.IsNotFound(getErr) {
			return false, nil
		}
		return false, fmt.Errorf("get %T %s: %w", obj, p.Name, getErr)
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
// as not found; when it does, ownedForApply's error names the conflict.
func (r *Reconciler) ownedOrForeign(ctx context.Context, p plan.Plan, obj client.Object, need bool) (bool, error) {
	if need {
		return r.ownedForApply(ctx, p, obj)
	}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, obj)
	if err == nil {
		ref := metav1.GetControllerOf(obj)
		if (ref == nil || ref.UID != p.UID) && obj.GetLabels()[v1alpha2.LabelManagedBy] != v1alpha2.LabelManagedByValue {
			return false, nil
		}
	}
	return r.claim(ctx, p, obj, err)
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

// applyConfiguration turns a typed object into a server-side apply
// configuration: its JSON form without status and creation timestamp,
// which would otherwise claim fields the controller does not set.
func applyConfiguration(obj runtime.Object) (runtime.ApplyConfiguration, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return client.ApplyConfigurationFromUnstructured(u), nil
}
