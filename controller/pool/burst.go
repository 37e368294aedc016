package pool

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// wanted is the replicas a Deployment asks for (1 when it does not say).
func wanted(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// keep is how many of the pods the pool gave a Function its Deployment d
// still needs: the replicas it wants and has not made ready itself. A
// Deployment at zero needs none, unless the Function was claimed here in
// the last ClaimHold (KEDA may not have scaled it up yet: heldAtZero).
func keep(d *appsv1.Deployment, heldAtZero bool) int {
	want := wanted(d)
	if want == 0 {
		if heldAtZero {
			return 1
		}
		return 0
	}
	return int(max(want-d.Status.ReadyReplicas, 0))
}

// burst gives fn standby pods of its pool for the replicas its Deployment
// d wants beyond those it has ready and those the pool gave it or is
// giving it (a claim from zero among them), as many as the pool has
// started: a burst of events is served in milliseconds by the pool's pods
// while the Deployment's own pods start, and each is retired once one of
// those is ready in its place (retire). Each pod given counts as a wake in
// the pool's demand, so the pool grows to the bursts it saw recently.
func (p *Pool) burst(ctx context.Context, fn types.NamespacedName, d *appsv1.Deployment) {
	p.mu.Lock()
	m, member := p.functions[fn]
	if !member || !p.running {
		p.mu.Unlock()
		return
	}
	need := int(wanted(d)-d.Status.ReadyReplicas) - len(p.given[fn]) - p.giving[fn]
	for range max(need, 0) {
		p.wokeNow(fn, m)
	}
	p.mu.Unlock()
	for range max(need, 0) {
		go p.giveOne(ctx, fn, m)
	}
}

// giveOne gives fn one standby pod for its burst, and logs what came of it.
func (p *Pool) giveOne(ctx context.Context, fn types.NamespacedName, m member) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ClaimTimeout)
	defer cancel()
	start := time.Now()
	got, took, err := p.give(ctx, fn, m, func(Claimed) {})
	switch {
	case errors.Is(err, ErrNoStandby):
		p.log.V(1).Info("no standby pod left for a Function scaling up: its Deployment's own pods serve the rest", "function", fn)
	case err != nil:
		p.log.Error(err, "give a standby pod to a Function scaling up", "function", fn)
	default:
		p.log.Info("gave a standby pod to a Function scaling up", "function", fn, "pod", got.Pod, "taken", took.taken, "loaded", took.loaded, "took", time.Since(start))
	}
}
