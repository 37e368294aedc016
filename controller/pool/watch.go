package pool

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// watch has the cache tell the pool what concerns it: a namespace whose
// pool size changes or that is being deleted, a standby pod that changes
// (claimed, deleted by someone, evicted), each a reason to look at the
// pool again; a Function's Deployment scaled up from zero or served
// (deploymentChanged). unwatch removes the handlers.
func (p *Pool) watch(ctx context.Context) (unwatch func(), err error) {
	var removes []func()
	unwatch = func() {
		for i := len(removes) - 1; i >= 0; i-- {
			removes[i]()
		}
	}
	for _, w := range []struct {
		what    string
		obj     client.Object
		handler toolscache.ResourceEventHandler
	}{
		{"namespaces", &corev1.Namespace{}, toolscache.ResourceEventHandlerFuncs{UpdateFunc: p.namespaceChanged}},
		{"pods", &corev1.Pod{}, toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj any) {
				if standby(oldObj) || standby(newObj) {
					p.poke()
				}
			},
			DeleteFunc: func(obj any) {
				if standby(obj) {
					p.poke()
				}
				p.claimedPodGone(obj)
			},
		}},
		{"deployments", &appsv1.Deployment{}, toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj any) {
				old, ok1 := oldObj.(*appsv1.Deployment)
				d, ok2 := newObj.(*appsv1.Deployment)
				if ok1 && ok2 {
					p.deploymentChanged(ctx, old, d)
				}
			},
		}},
	} {
		inf, infErr := p.cache.GetInformer(ctx, w.obj)
		if infErr != nil {
			unwatch()
			return nil, fmt.Errorf("watch %s: %w", w.what, infErr)
		}
		reg, regErr := inf.AddEventHandler(w.handler)
		if regErr != nil {
			unwatch()
			return nil, fmt.Errorf("watch %s: %w", w.what, regErr)
		}
		removes = append(removes, func() { _ = inf.RemoveEventHandler(reg) })
	}
	return unwatch, nil
}

// namespaceChanged pokes the pool when a namespace's pool size changes or
// it starts being deleted.
func (p *Pool) namespaceChanged(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Namespace)
	ns, ok2 := newObj.(*corev1.Namespace)
	if ok1 && ok2 && (old.Annotations[AnnotationSize] != ns.Annotations[AnnotationSize] ||
		old.DeletionTimestamp.IsZero() != ns.DeletionTimestamp.IsZero()) {
		p.poke()
	}
}

// claimedPodGone forgets a claimed pod deleted (retired, or by someone
// else), and the claim it served: the Function's next first event claims
// another.
func (p *Pool) claimedPodGone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[LabelClaimedBy] == "" {
		return
	}
	fn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[LabelClaimedBy]}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetGiven(fn, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	if c, ok := p.claims[fn]; ok && isClosed(c.loaded) && c.got.Pod == pod.Name {
		delete(p.claims, fn)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// standby reports whether obj is (or was, deleted) a standby pod.
func standby(obj any) bool {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	return ok && pod.Labels[LabelShape] != ""
}

// deploymentChanged gives standby pods to a pooled Function whose
// Deployment was scaled up: a claim from zero (the first of them), and
// one for each further replica it has not made ready (burst); and retires
// the pods given to it once the Deployment's own ready pods take their
// place, or it is at zero again (keep).
func (p *Pool) deploymentChanged(ctx context.Context, old, d *appsv1.Deployment) {
	name := d.Labels[v1alpha2.LabelFunctionName]
	if name == "" {
		return
	}
	fn := types.NamespacedName{Namespace: d.Namespace, Name: name}
	switch {
	case wanted(d) > wanted(old):
		if wanted(old) == 0 && d.Status.ReadyReplicas == 0 {
			// Started here, so that the burst counts it.
			if _, err := p.startClaim(ctx, fn); err != nil && !errors.Is(err, errBurstsOnly) {
				return // not pooled, or served
			}
		}
		p.burst(ctx, fn, d)
	case d.Status.ReadyReplicas > old.Status.ReadyReplicas, wanted(d) < wanted(old):
		go p.retire(ctx, fn, keep(d, false))
	}
}
