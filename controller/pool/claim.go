package pool

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// token is the bearer token of a standby pod.
func (p *Pool) token(namespace, name string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(namespace + "/" + name))
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Claim: those of package contract/claim, which the claim
// listener answers with their status (claim.StatusOf).
var (
	// ErrNotPooled: the pool does not serve the Function (it does not
	// scale to zero, or cannot be served by a standby pod: Observe said
	// why), or the pool does not run in this process (not the leader).
	ErrNotPooled = claim.ErrNotPooled
	// ErrNoStandby: no standby pod of the Function's pool has started.
	ErrNoStandby = claim.ErrNoStandby
	// ErrServed: the Function's Deployment has a ready pod of its own.
	ErrServed = claim.ErrServed
)

// Claimed is a pod the pool gave a Function.
type Claimed struct {
	// Pod is the pod's name, in the Function's namespace.
	Pod string
	// Address is host:port of the pod's host, which serves the Function.
	Address string
}

// claimState is one claim of a standby pod for a Function: under way
// until loaded is closed, then its result, kept until the pod is retired
// so that every caller (the Deployment watch, each event bridge replica's
// first event or request) is given the same pod.
type claimState struct {
	at     time.Time
	loaded chan struct{}
	once   sync.Once
	got    Claimed
	err    error
}

// answer gives the claim its result, once: later answers are dropped.
func (c *claimState) answer(got Claimed, err error) {
	c.once.Do(func() {
		c.got, c.err = got, err
		close(c.loaded)
	})
}

// Claim gives Function fn a standby pod of its pool, at once, and returns
// it once its host serves fn: the first event or request for fn at zero
// calls it, so that it is delivered to the pod's address without waiting
// for KEDA, the Deployment or an EndpointSlice. The pod is labelled as
// fn's and owned by it meanwhile (its Service, the Deployment and the
// EndpointSlices catch up behind), and is retired as any claimed pod is:
// once fn's Deployment has a ready pod of its own, or is scaled to zero
// (but not in the first ClaimHold after the claim, which may come before
// KEDA scaled it up). A claim already made or under way for fn is shared:
// fn never gets two pods, and a pod never serves two Functions. ctx
// bounds the wait only; the claim goes on without the caller, for at most
// ClaimTimeout. Errors: ErrNotPooled, ErrServed, ErrNoStandby, or the
// host's refusal.
func (p *Pool) Claim(ctx context.Context, fn types.NamespacedName) (Claimed, error) {
	var d appsv1.Deployment
	if err := p.cache.Get(ctx, fn, &d); err == nil && d.Status.ReadyReplicas > 0 {
		return Claimed{}, ErrServed
	}
	p.mu.Lock()
	c, ok := p.claims[fn]
	if !ok {
		if _, member := p.functions[fn]; !member || !p.running {
			p.mu.Unlock()
			return Claimed{}, ErrNotPooled
		}
		c = &claimState{at: time.Now(), loaded: make(chan struct{})}
		p.claims[fn] = c
		now := p.now()
		p.demandOf(poolKey{fn.Namespace, p.functions[fn].shape}).woke(now, p.cfg.Window)
		p.woke[fn] = now
		go p.claim(fn, c)
	}
	p.mu.Unlock()
	select {
	case <-c.loaded:
		return c.got, c.err
	case <-ctx.Done():
		return Claimed{}, ctx.Err()
	}
}

// claim gives a standby pod of fn's pool to fn, as c: the host loads fn
// (c is answered then), and the pod is labelled as fn's, which puts it in
// fn's Service. A claim that fails is forgotten, so that the next one
// tries again.
func (p *Pool) claim(fn types.NamespacedName, c *claimState) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ClaimTimeout)
	defer cancel()
	p.mu.Lock()
	m, ok := p.functions[fn]
	p.mu.Unlock()
	if !ok {
		p.fail(fn, c, ErrNotPooled)
		return
	}
	start := time.Now()
	pod, err := p.take(ctx, poolKey{fn.Namespace, m.shape}, m.plan)
	if err != nil || pod == nil {
		if err != nil {
			p.log.Error(err, "take a standby pod", "function", fn)
		} else {
			p.log.Info("no standby pod ready: the Function wakes on the Deployment path", "function", fn)
			err = ErrNoStandby
		}
		p.fail(fn, c, err)
		return
	}
	podKey := client.ObjectKeyFromObject(pod)
	defer func() {
		p.mu.Lock()
		delete(p.taken, podKey)
		p.mu.Unlock()
		p.poke()
	}()
	// The host loads the Function while the pod is labelled as its: the
	// two go on at once, and the claim is answered as soon as the host
	// serves the Function (a pod serves one Function only, whatever its
	// labels say).
	got := Claimed{Pod: pod.Name, Address: p.address(pod)}
	loaded := make(chan error, 1)
	go func() { loaded <- p.specialize(ctx, pod, m.plan) }()
	patched := p.label(ctx, pod, fn, m.plan)
	loadErr := <-loaded
	loadedIn := time.Since(start) // the claim is answered then: the labels may come later
	if loadErr == nil {
		c.answer(got, nil)
	}
	if err := errors.Join(loadErr, <-patched); err != nil {
		p.log.Error(err, "give a standby pod its Function; deleting the pod", "function", fn, "pod", pod.Name)
		_ = p.c.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		var refused *hostAnswer
		p.mu.Lock()
		if errors.As(loadErr, &refused) {
			p.failed[fn] = refused.Error()
		}
		p.mu.Unlock()
		p.fail(fn, c, err)
		return
	}
	p.mu.Lock()
	delete(p.failed, fn)
	p.mu.Unlock()
	p.log.Info("gave a standby pod to a Function woken from zero", "function", fn, "pod", pod.Name, "loaded", loadedIn, "took", time.Since(start))
}

// fail ends claim c of fn with err and forgets it.
func (p *Pool) fail(fn types.NamespacedName, c *claimState, err error) {
	p.mu.Lock()
	if p.claims[fn] == c {
		delete(p.claims, fn)
	}
	p.mu.Unlock()
	c.answer(Claimed{}, err)
}

// label patches pod into fn's Service (fn's labels, LabelClaimedBy, no
// LabelShape) and under fn's ownership (deleted with it, whatever becomes
// of the pool), on a goroutine; the channel gives the result. The patch
// carries the pod's UID, which the API server does not let change: it
// fails on another pod of the same name. No optimistic lock: one claimer
// takes a pod (taken), and the kubelet's status updates, which a lock
// would trip over, change no label.
func (p *Pool) label(ctx context.Context, pod *corev1.Pod, fn types.NamespacedName, plan plan.Plan) <-chan error {
	base := pod.DeepCopy()
	base.UID = ""
	patch := client.MergeFrom(base)
	labelled := pod.DeepCopy()
	for k, v := range plan.Labels {
		labelled.Labels[k] = v
	}
	labelled.Labels[LabelClaimedBy] = fn.Name
	delete(labelled.Labels, LabelShape)
	labelled.OwnerReferences = append(labelled.OwnerReferences, metav1.OwnerReference{
		APIVersion: v1alpha2.GroupVersion.String(), Kind: "Function", Name: fn.Name, UID: plan.UID,
	})
	done := make(chan error, 1)
	go func() { done <- p.c.Patch(ctx, labelled, patch) }()
	return done
}

// claimedRecently reports whether fn's pod was claimed here less than
// ClaimHold ago: its Deployment may not have been scaled up yet.
func (p *Pool) claimedRecently(fn types.NamespacedName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.claims[fn]
	return ok && time.Since(c.at) < p.cfg.ClaimHold
}

// take returns a started standby pod of pool k for fn and marks it taken
// (one prepared with fn's dependencies first: rank); nil when there is
// none.
func (p *Pool) take(ctx context.Context, k poolKey, fn plan.Plan) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.InNamespace(k.namespace), client.MatchingLabels{LabelShape: k.shape}); err != nil {
		return nil, fmt.Errorf("list standby pods: %w", err)
	}
	hash := ""
	if d := Specialization(fn).Dependencies; d != nil {
		hash = d.Hash
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rank(pods.Items, hash)
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := client.ObjectKeyFromObject(pod)
		if p.taken[key] || !started(pod) || !p.ours(pod) {
			continue
		}
		p.taken[key] = true
		return pod, nil
	}
	return nil, nil
}

// ours reports whether the pool made pod: it is the pod the pool made
// under its name (its UID), and its host's token hash is that of the
// token the pool derives for it. A pod someone else labelled as standby (a
// tenant of the namespace, say), or made under the name of one of the
// pool's after deleting it, with its environment copied, is never given
// a Function's source, nor counted in the pool. p.mu is held.
func (p *Pool) ours(pod *corev1.Pod) bool {
	if uid, ok := p.made[client.ObjectKeyFromObject(pod)]; !ok || uid != pod.UID {
		return false
	}
	want := runtimes.StandbyTokenHash(p.token(pod.Namespace, pod.Name))
	for _, c := range pod.Spec.Containers {
		if c.Name != resources.ContainerFunction {
			continue
		}
		for _, e := range c.Env {
			if e.Name == runtimes.EnvStandbyTokenSHA256 {
				return e.Value == want
			}
		}
	}
	return false
}

// started reports whether a pod's host serves: running, with an address,
// its container's startup probe passed, not being deleted.
func started(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == resources.ContainerFunction {
			return c.Started != nil && *c.Started
		}
	}
	return false
}

// retire deletes the pods the pool gave fn, and forgets its claim.
func (p *Pool) retire(ctx context.Context, fn types.NamespacedName) {
	p.mu.Lock()
	delete(p.claims, fn)
	p.mu.Unlock()
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.InNamespace(fn.Namespace), client.MatchingLabels{LabelClaimedBy: fn.Name}); err != nil {
		p.log.Error(err, "list claimed pods", "function", fn)
		return
	}
	for i := range pods.Items {
		if err := p.c.Delete(ctx, &pods.Items[i]); client.IgnoreNotFound(err) != nil {
			p.log.Error(err, "delete a claimed pod", "function", fn, "pod", pods.Items[i].Name)
			continue
		}
		p.log.Info("deleted the pod the pool gave a Function", "function", fn, "pod", pods.Items[i].Name)
	}
}
