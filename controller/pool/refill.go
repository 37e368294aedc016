package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// deleteStandby deletes every standby pod the cache holds.
func (p *Pool) deleteStandby(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.HasLabels{LabelShape}); err != nil {
		return fmt.Errorf("list standby pods: %w", err)
	}
	for i := range pods.Items {
		if err := p.c.Delete(ctx, &pods.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete standby pod %s/%s: %w", pods.Items[i].Namespace, pods.Items[i].Name, err)
		}
	}
	return nil
}

// pools returns the pools the pool's Functions need, each with the plan of
// one of its Functions: the pool of each Function that scales to zero,
// and that of a Function that does not only while it scaled up itself in
// the last Config.Idle (another Function's wakes in the same pool do not
// count). p.mu is held.
func (p *Pool) pools() map[poolKey]plan.Plan {
	want := map[poolKey]plan.Plan{}
	now := p.now()
	for fn, m := range p.functions {
		at, woke := p.woke[fn]
		if m.burstsOnly && (!woke || now.Sub(at) > p.cfg.Idle) {
			continue
		}
		want[poolKey{m.plan.Namespace, m.shape}] = m.plan
	}
	return want
}

// refill makes the standby pods each pool a pooled Function needs wants
// (targets), and deletes those no pool wants (and claimed pods of
// Functions the pool no longer serves).
func (p *Pool) refill(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.HasLabels{LabelShape}); err != nil {
		return fmt.Errorf("list standby pods: %w", err)
	}
	p.mu.Lock()
	want := p.pools()
	p.mu.Unlock()
	type nsSize struct {
		n     int
		fixed bool
	}
	sizes := map[string]nsSize{}
	for k := range want {
		if _, ok := sizes[k.namespace]; !ok {
			n, fixed := p.sizeOf(ctx, k.namespace)
			sizes[k.namespace] = nsSize{n, fixed}
		}
	}
	p.mu.Lock()
	p.prepare(ctx, pods.Items)
	size := p.targets(want, func(ns string) (int, bool) { s := sizes[ns]; return s.n, s.fixed })
	have := map[poolKey]int{}
	var extra []*corev1.Pod
	listed := map[types.NamespacedName]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := client.ObjectKeyFromObject(pod)
		listed[key] = true
		delete(p.created, key)
		if pod.DeletionTimestamp != nil || !p.ours(pod) {
			continue
		}
		k := poolKey{pod.Namespace, pod.Labels[LabelShape]}
		if _, ok := want[k]; !ok || have[k] >= size[k] {
			if !p.taken[key] {
				extra = append(extra, pod)
			}
			continue
		}
		have[k]++
	}
	for _, k := range p.created {
		have[k]++
	}
	// The pods made that are gone, or given to a Function, are no longer
	// standby pods of the pool's.
	for key := range p.made {
		if _, pending := p.created[key]; !listed[key] && !pending {
			delete(p.made, key)
		}
	}
	var todo []poolKey
	for k := range want {
		for n := have[k]; n < size[k]; n++ {
			todo = append(todo, k)
		}
	}
	p.mu.Unlock()
	var errs []error
	for _, pod := range extra {
		if err := p.c.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete standby pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	for _, k := range todo {
		if err := p.create(ctx, k, want[k]); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, p.retireServed(ctx))
	return errors.Join(errs...)
}

// retireServed deletes the claimed pods whose Function's Deployment has
// ready pods of its own in their place or is at zero (and was not claimed
// here in the last ClaimHold, before KEDA scaled it up: keep): those whose
// change the Deployment watch missed (a claim that ended after it, an
// earlier leader's).
func (p *Pool) retireServed(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.HasLabels{LabelClaimedBy}); err != nil {
		return fmt.Errorf("list claimed pods: %w", err)
	}
	done := map[types.NamespacedName]bool{}
	for _, pod := range pods.Items {
		fn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[LabelClaimedBy]}
		if done[fn] {
			continue
		}
		done[fn] = true
		var d appsv1.Deployment
		err := p.c.Get(ctx, fn, &d)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("get deployment %s: %w", fn, err)
		}
		if apierrors.IsNotFound(err) {
			p.retire(ctx, fn, 0)
			continue
		}
		p.retire(ctx, fn, keep(&d, p.claimedRecently(fn)))
	}
	return nil
}

// sizeOf is the pool size of a namespace, and whether it is fixed: 0
// while it is being deleted, else its AnnotationSize (fixed), else
// Config.Size (the most the demand policy keeps).
func (p *Pool) sizeOf(ctx context.Context, namespace string) (size int, fixed bool) {
	var ns corev1.Namespace
	if err := p.c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return p.cfg.Size, false
	}
	if !ns.DeletionTimestamp.IsZero() {
		// Nothing can be made in a namespace being deleted.
		return 0, true
	}
	v, ok := ns.Annotations[AnnotationSize]
	if !ok {
		return p.cfg.Size, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > MaxSize {
		p.log.Info("ignoring a namespace's warm pool size: want an integer within 0..MaxSize", "namespace", namespace, "annotation", AnnotationSize, "value", v, "MaxSize", MaxSize)
		return p.cfg.Size, false
	}
	return n, true
}

// targets is the standby pods each pool of want keeps: a namespace's
// fixed size (AnnotationSize), else what its demand asks within its size
// (Config.Size), all within Config.MaxStandby (allocate). It forgets the
// demand of pools no Function needs any more. p.mu is held.
func (p *Pool) targets(want map[poolKey]plan.Plan, sizeOf func(namespace string) (int, bool)) map[poolKey]int {
	now := p.now()
	for k := range p.demand {
		if _, ok := want[k]; !ok {
			delete(p.demand, k)
		}
	}
	target := make(map[poolKey]int, len(want))
	last := make(map[poolKey]time.Time, len(want))
	for k := range want {
		n, fixed := sizeOf(k.namespace)
		d := p.demandOf(k)
		last[k] = d.last
		if fixed {
			target[k] = n
		} else {
			target[k] = d.want(now, p.cfg.Window, p.cfg.Idle, n)
		}
	}
	got := allocate(target, last, p.cfg.MaxStandby)
	if p.standbyPods != nil {
		wanted, kept := 0, map[string]int{}
		for k, n := range target {
			wanted += n
			kept[want[k].Runtime.Name] += got[k]
		}
		p.standbyPods.Reset()
		for runtime, n := range kept {
			p.standbyPods.WithLabelValues(runtime).Set(float64(n))
		}
		total := 0
		for _, n := range got {
			total += n
		}
		p.cappedPods.Set(float64(wanted - total))
	}
	return got
}

// create makes a standby pod of pool k, shaped as fn.
func (p *Pool) create(ctx context.Context, k poolKey, fn plan.Plan) error {
	suffix := make([]byte, 5)
	if _, err := rand.Read(suffix); err != nil {
		return fmt.Errorf("name a standby pod: %w", err)
	}
	name := "kfn-pool-" + fn.Runtime.Name + "-" + hex.EncodeToString(suffix)
	env := append(podEnv(fn), corev1.EnvVar{Name: runtimes.EnvStandbyTokenSHA256, Value: runtimes.StandbyTokenHash(p.token(k.namespace, name))})
	labels := map[string]string{LabelShape: k.shape, v1alpha2.LabelManagedBy: v1alpha2.LabelManagedByValue}
	pod := resources.StandbyPod(withoutDependencies(fn), p.cfg.Resources, name, labels, env)
	if err := p.c.Apply(ctx, pod, client.FieldOwner("kfn-pool"), client.ForceOwnership); err != nil {
		return fmt.Errorf("create standby pod %s/%s: %w", k.namespace, name, err)
	}
	if pod.UID == nil || *pod.UID == "" {
		return fmt.Errorf("create standby pod %s/%s: the API server's answer has no UID", k.namespace, name)
	}
	key := types.NamespacedName{Namespace: k.namespace, Name: name}
	p.mu.Lock()
	p.created[key] = k
	p.made[key] = *pod.UID
	p.mu.Unlock()
	return nil
}
