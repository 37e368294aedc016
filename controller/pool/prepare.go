package pool

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// preparation is what a standby pod was asked to prepare: the dependency
// hash, and whether its host has them.
type preparation struct {
	hash string
	done bool
}

// prepareTimeout bounds one prepare request (a fetch and an unpack).
const prepareTimeout = time.Minute

// toPrepare returns the dependency set standby pods of pool k are
// prepared with: that of the pool's Function with dependencies that woke
// last (or, none having woken, the first by name); nil when none has
// dependencies from the cache. p.mu is held.
func (p *Pool) toPrepare(k poolKey) *runtimes.Preparation {
	var best types.NamespacedName
	var bestPlan plan.Plan
	var bestAt time.Time
	found := false
	for fn, m := range p.functions {
		if fn.Namespace != k.namespace || m.shape != k.shape {
			continue
		}
		s := Specialization(m.plan)
		if s.Dependencies == nil {
			continue
		}
		at := p.woke[fn]
		if !found || at.After(bestAt) || (at.Equal(bestAt) && fn.Name < best.Name) {
			best, bestPlan, bestAt, found = fn, m.plan, at, true
		}
	}
	if !found {
		return nil
	}
	s := Specialization(bestPlan)
	env := map[string]string{}
	for _, name := range []string{runtimes.EnvDependencyCache, runtimes.EnvDepsDir, runtimes.EnvIdentityTokenFile} {
		if v, ok := s.Env[name]; ok {
			env[name] = v
		}
	}
	return &runtimes.Preparation{Env: env, Dependencies: s.Dependencies}
}

// prepare asks each started standby pod of ours that was not asked yet to
// prepare its pool's dependency set, and forgets the pods no longer
// listed. pods are the standby pods listed. p.mu is held.
func (p *Pool) prepare(ctx context.Context, pods []corev1.Pod) {
	listed := map[types.NamespacedName]bool{}
	for i := range pods {
		pod := &pods[i]
		key := client.ObjectKeyFromObject(pod)
		listed[key] = true
		if _, asked := p.prepared[key]; asked || p.taken[key] || !started(pod) || !p.ours(pod) {
			continue
		}
		prep := p.toPrepare(poolKey{pod.Namespace, pod.Labels[LabelShape]})
		if prep == nil {
			continue
		}
		p.prepared[key] = preparation{hash: prep.Dependencies.Hash}
		go p.prepareOne(ctx, pod.DeepCopy(), *prep)
	}
	for key := range p.prepared {
		if !listed[key] {
			delete(p.prepared, key)
		}
	}
}

// prepareOne has pod's host prepare prep. A set the cache does not hold
// yet, or a host that could not be reached, is asked again at the next
// refill; a host that refuses keeps its pod unprepared.
func (p *Pool) prepareOne(ctx context.Context, pod *corev1.Pod, prep runtimes.Preparation) {
	ctx, cancel := context.WithTimeout(ctx, prepareTimeout)
	defer cancel()
	start := time.Now()
	err := p.prepareHost(ctx, pod, prep)
	key := client.ObjectKeyFromObject(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, still := p.prepared[key]; !still {
		return
	}
	var refused *hostAnswer
	switch {
	case err == nil:
		p.prepared[key] = preparation{hash: prep.Dependencies.Hash, done: true}
		p.log.V(1).Info("prepared a standby pod with its pool's dependencies", "pod", key, "hash", prep.Dependencies.Hash, "took", time.Since(start))
	case errors.As(err, &refused) && refused.status != http.StatusNotFound:
		p.log.Info("a standby host did not prepare its pool's dependencies", "pod", key, "error", err)
	default:
		delete(p.prepared, key) // asked again at the next refill
		p.log.V(1).Info("standby pod not prepared yet", "pod", key, "error", err)
	}
}

// rank orders the standby pods take prefers for a Function with
// dependency hash (hash "" for none): prepared with its set first, then
// pods prepared with nothing, then the others. p.mu is held.
func (p *Pool) rank(pods []corev1.Pod, hash string) {
	score := func(pod *corev1.Pod) int {
		prep, ok := p.prepared[client.ObjectKeyFromObject(pod)]
		switch {
		case hash != "" && ok && prep.hash == hash && prep.done:
			return 0
		case !ok, hash != "" && prep.hash == hash: // being prepared with it: specialize waits for that
			return 1
		default:
			return 2
		}
	}
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int { return score(&a) - score(&b) })
}
