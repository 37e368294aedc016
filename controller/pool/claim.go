package pool

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// errBurstsOnly: the Function does not scale to zero; the pool serves
	// its scale-ups only (burst), never a claim.
	errBurstsOnly = fmt.Errorf("%w: it does not scale to zero, and the warm pool serves its scale-ups only", ErrNotPooled)
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
// fn's and owned by it behind the answer (its Service, the Deployment and
// the EndpointSlices catch up), and is retired as any claimed pod is:
// once fn's Deployment has a ready pod of its own, or is scaled to zero
// (but not in the first ClaimHold after the claim, which may come before
// KEDA scaled it up). A claim already made or under way for fn is shared:
// fn never gets two pods, and a pod never serves two Functions. ctx
// bounds the wait only; the claim goes on without the caller, for at most
// ClaimTimeout. Errors: ErrNotPooled, ErrServed, ErrNoStandby, or the
// host's refusal.
func (p *Pool) Claim(ctx context.Context, fn types.NamespacedName) (Claimed, error) {
	c, err := p.startClaim(ctx, fn)
	if err != nil {
		return Claimed{}, err
	}
	select {
	case <-c.loaded:
		return c.got, c.err
	case <-ctx.Done():
		return Claimed{}, ctx.Err()
	}
}

// startClaim returns fn's claim, started now unless one is under way or
// made: the pool counts it as one of fn's pods from then on (burst).
func (p *Pool) startClaim(ctx context.Context, fn types.NamespacedName) (*claimState, error) {
	var d appsv1.Deployment
	if err := p.cache.Get(ctx, fn, &d); err == nil && d.Status.ReadyReplicas > 0 {
		return nil, ErrServed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.claims[fn]
	if ok {
		return c, nil
	}
	m, member := p.functions[fn]
	if !member || !p.running {
		return nil, ErrNotPooled
	}
	if m.burstsOnly {
		return nil, errBurstsOnly
	}
	c = &claimState{at: time.Now(), loaded: make(chan struct{})}
	p.claims[fn] = c
	p.wokeNow(fn, m)
	go p.claim(fn, m, c)
	return c, nil
}

// wokeNow counts a pod given to fn in its pool's demand, and starts the
// count of fn's pods being given (give ends it). p.mu is held.
func (p *Pool) wokeNow(fn types.NamespacedName, m member) {
	now := p.now()
	p.demandOf(poolKey{fn.Namespace, m.shape}).woke(now, p.cfg.Window)
	p.woke[fn] = now
	p.giving[fn]++
}

// claim gives a standby pod of fn's pool to fn, as c: the host loads fn
// (c is answered then), and the pod is labelled as fn's, which puts it in
// fn's Service. A claim that fails is forgotten, so that the next one
// tries again.
func (p *Pool) claim(fn types.NamespacedName, m member, c *claimState) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ClaimTimeout)
	defer cancel()
	start := time.Now()
	got, took, err := p.give(ctx, fn, m, func(got Claimed) { c.answer(got, nil) })
	switch {
	case errors.Is(err, ErrNoStandby):
		p.log.Info("no standby pod ready: the Function wakes on the Deployment path", "function", fn)
	case err != nil:
		p.log.Error(err, "give a standby pod its Function", "function", fn)
	default:
		p.log.Info("gave a standby pod to a Function woken from zero", "function", fn, "pod", got.Pod, "taken", took.taken, "loaded", took.loaded, "took", time.Since(start))
		return
	}
	p.fail(fn, c, err)
}

// give takes a started standby pod of fn's pool (m) and gives it fn: the
// host loads fn (loaded is called then), then the pod is labelled as fn's
// and owned by it, which puts it in fn's Service. It returns the pod and
// how long its host took to serve fn; ErrNoStandby when the pool has none
// started. A pod whose host refuses fn, or that cannot be labelled, is
// deleted. It ends the count wokeNow started.
func (p *Pool) give(ctx context.Context, fn types.NamespacedName, m member, loaded func(Claimed)) (Claimed, giveTimes, error) {
	var took giveTimes
	start := time.Now()
	pod, err := p.take(ctx, poolKey{fn.Namespace, m.shape}, m.plan)
	took.taken = time.Since(start)
	p.mu.Lock()
	p.giving[fn]--
	if p.giving[fn] <= 0 {
		delete(p.giving, fn)
	}
	p.mu.Unlock()
	if err != nil {
		return Claimed{}, took, fmt.Errorf("take a standby pod: %w", err)
	}
	if pod == nil {
		return Claimed{}, took, ErrNoStandby
	}
	podKey := client.ObjectKeyFromObject(pod)
	p.mu.Lock()
	p.givenTo(fn)[podKey] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.taken, podKey)
		p.mu.Unlock()
		p.poke()
	}()
	// The host loads the Function, the caller hears as soon as it serves
	// it, and only labelSettle later is the pod labelled as the
	// Function's (a pod serves one Function only, whatever its labels
	// say): the label's patch and what follows it (the EndpointSlice
	// controller's update, every watcher of pods and slices) would
	// otherwise take the node's CPU while the host loads the Function and
	// the first deliveries reach it, on the wake's path. The callers take
	// the claimed address as the Function's endpoint meanwhile.
	got := Claimed{Pod: pod.Name, Address: p.address(pod)}
	loadErr := p.specialize(ctx, pod, m.plan)
	took.loaded = time.Since(start)
	var labelErr error
	if loadErr == nil {
		loaded(got)
		select {
		case <-time.After(labelSettle):
		case <-ctx.Done():
		}
		labelErr = p.label(ctx, pod, fn, m.plan)
	}
	if err := errors.Join(loadErr, labelErr); err != nil {
		_ = p.c.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		var refused *hostAnswer
		p.mu.Lock()
		p.forgetGiven(fn, podKey)
		if errors.As(loadErr, &refused) {
			p.failed[fn] = refused.Error()
		}
		p.mu.Unlock()
		return got, took, fmt.Errorf("give standby pod %s (deleted): %w", pod.Name, err)
	}
	p.mu.Lock()
	delete(p.failed, fn)
	p.mu.Unlock()
	return got, took, nil
}

// labelSettle is how long after a claim's answer its pod is labelled:
// the first deliveries to the pod, made the moment the claim is
// answered, end within it.
const labelSettle = 50 * time.Millisecond

// giveTimes are how long give took to take a standby pod, and until its
// host served the Function, both since give began.
type giveTimes struct{ taken, loaded time.Duration }

// givenTo returns the set of pods given to fn (being loaded or serving,
// not yet seen deleted). p.mu is held.
func (p *Pool) givenTo(fn types.NamespacedName) map[types.NamespacedName]bool {
	g, ok := p.given[fn]
	if !ok {
		g = map[types.NamespacedName]bool{}
		p.given[fn] = g
	}
	return g
}

// forgetGiven drops pod from the pods given to fn. p.mu is held.
func (p *Pool) forgetGiven(fn, pod types.NamespacedName) {
	delete(p.given[fn], pod)
	if len(p.given[fn]) == 0 {
		delete(p.given, fn)
	}
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
// of the pool). The patch carries the pod's UID, which the API server does
// not let change: it fails on another pod of the same name. No optimistic
// lock: one claimer takes a pod (taken), and the kubelet's status updates,
// which a lock would trip over, change no label.
func (p *Pool) label(ctx context.Context, pod *corev1.Pod, fn types.NamespacedName, plan plan.Plan) error {
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
	return p.c.Patch(ctx, labelled, patch)
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

// retire deletes the pods the pool gave fn but keep of them (those fn's
// Deployment still waits for pods of its own in place of: keep), the
// pod of fn's claim last; with none kept it forgets fn's claim too.
func (p *Pool) retire(ctx context.Context, fn types.NamespacedName, keep int) {
	if keep <= 0 {
		p.mu.Lock()
		delete(p.claims, fn)
		p.mu.Unlock()
	}
	var list corev1.PodList
	if err := p.c.List(ctx, &list, client.InNamespace(fn.Namespace), client.MatchingLabels{LabelClaimedBy: fn.Name}); err != nil {
		p.log.Error(err, "list claimed pods", "function", fn)
		return
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			pods = append(pods, &list.Items[i])
		}
	}
	if len(pods) <= keep {
		return
	}
	p.mu.Lock()
	claimed := ""
	if c, ok := p.claims[fn]; ok && isClosed(c.loaded) {
		claimed = c.got.Pod
	}
	p.mu.Unlock()
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if (a.Name == claimed) != (b.Name == claimed) {
			if a.Name == claimed {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, pod := range pods[:len(pods)-max(keep, 0)] {
		if err := p.c.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			p.log.Error(err, "delete a claimed pod", "function", fn, "pod", pod.Name)
			continue
		}
		p.mu.Lock()
		p.forgetGiven(fn, client.ObjectKeyFromObject(pod))
		p.mu.Unlock()
		p.log.Info("deleted a pod the pool gave a Function", "function", fn, "pod", pod.Name, "kept", max(keep, 0))
	}
}
