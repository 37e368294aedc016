package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// Apply makes the runner run exactly fns: new ones start (with their
// fixed replicas or minReplicas), changed ones roll to their new version
// without dropping requests, and removed ones are drained. A function that
// cannot be prepared or whose new version does not start keeps its old
// version; its error is returned, the others still apply.
//
// Each function is installed and started by an operation of its own, in
// the background (at most parallelPerNamespace of a namespace at once; a
// newer version cancels the one under way), so one that is slow delays no
// other, nor Apply: the first Apply waits for them at most StartWait,
// later ones ApplyWait (by default not at all), or until ctx ends.
// Removed functions drain in the background too, within the same wait.
// The errors returned are those of the functions whose wanted version is
// done: one still being installed or started reports when done, to the
// next Apply (Changes tells when). A version that failed is not tried
// again until it changes (an edit of the Function, its source or the
// objects its env names).
func (r *Runner) Apply(ctx context.Context, fns []*serverlessv1alpha2.Function) []error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return []error{ErrStopped}
	}
	wait := r.cfg.ApplyWait
	if r.applies == 0 {
		wait = r.cfg.StartWait
	}
	r.applies++
	order, started := r.wantLocked(fns)
	if removed := r.removeUnwantedLocked(order); removed != nil {
		started = append(started, removed)
	}
	r.mu.Unlock()
	awaitAll(ctx, started, wait)
	return r.outcomes(order, wait)
}

// wantLocked makes fns the wanted versions of their slots, starting an
// operation for each that changed and has none under way (a newer version
// cancels the one under way), and returns the slots in the order of fns
// and the channels that close once their operations are idle. Holding
// r.mu.
func (r *Runner) wantLocked(fns []*serverlessv1alpha2.Function) (order []*slot, started []chan struct{}) {
	seen := map[string]bool{}
	for _, fn := range fns {
		key := Key(fn.Namespace, fn.Name)
		fp := r.fingerprintLocked(key, fn)
		s := r.slots[key]
		if s == nil {
			s = &slot{key: key, namespace: fn.Namespace}
			r.slots[key] = s
		}
		if !seen[key] {
			seen[key] = true
			order = append(order, s)
		}
		if fp != "" && fp == s.wantFP {
			continue // applied, or being applied: nothing new
		}
		s.want, s.wantFP, s.pending, s.late = fn, fp, true, false
		if s.cancel != nil {
			s.cancel() // a newer version: the one under way is not wanted
		}
		if !s.running {
			s.running, s.idle = true, make(chan struct{})
			r.work.Add(1)
			go r.operate(s)
		}
		started = append(started, s.idle)
	}
	return order, started
}

// removeUnwantedLocked ends the operations of the slots not in wanted and
// drains their functions in the background; it returns a channel that
// closes once they are drained, nil when there was none. Holding r.mu.
func (r *Runner) removeUnwantedLocked(wanted []*slot) chan struct{} {
	keep := map[string]bool{}
	for _, s := range wanted {
		keep[s.key] = true
	}
	for key, s := range r.slots {
		if !keep[key] {
			s.removed = true
			if s.cancel != nil {
				s.cancel()
			}
			delete(r.slots, key)
		}
	}
	var gone []*Function
	for key, f := range r.fns {
		if !keep[key] {
			gone = append(gone, f)
			delete(r.fns, key)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	removed := make(chan struct{})
	r.work.Add(1)
	go func() {
		defer r.work.Done()
		defer close(removed)
		var wg sync.WaitGroup
		for _, f := range gone {
			wg.Go(f.Pool.Stop)
		}
		wg.Wait()
	}()
	return removed
}

// awaitAll waits until every channel of started is closed, for at most
// wait (not at all when 0, without a bound when negative) or until ctx
// ends.
func awaitAll(ctx context.Context, started []chan struct{}, wait time.Duration) {
	if wait == 0 {
		return
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	for _, done := range started {
		select {
		case <-done:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

// outcomes are the errors of the slots of order whose wanted version is
// done; one still under way is marked late (Changes counts it when done),
// and, when Apply waited for it, said so.
func (r *Runner) outcomes(order []*slot, wait time.Duration) []error {
	var errs []error
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range order {
		switch {
		case s.doneFP == s.wantFP:
			if s.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.key, s.err))
			}
		case s.pending || s.running:
			if !s.late && wait != 0 {
				fmt.Fprintf(r.cfg.Log, "%s | kfn: still being installed or started; the other functions do not wait for it\n", s.key)
			}
			s.late = true
		}
	}
	return errs
}

// Changes counts the operations (installs and starts) that were done
// after the Apply that began them had returned: a caller that applies
// more than the functions, or reports Apply's errors, applies again when
// it changes.
func (r *Runner) Changes() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes
}

// operate applies s's wanted version until none is pending, each
// operation in turn on its own context; it ends when s is removed or the
// runner stopped.
func (r *Runner) operate(s *slot) {
	defer r.work.Done()
	r.mu.Lock()
	sem := r.sems[s.namespace]
	if sem == nil {
		sem = make(chan struct{}, parallelPerNamespace)
		r.sems[s.namespace] = sem
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		if !s.pending || s.removed || r.stopped {
			s.running = false
			close(s.idle)
			if s.late {
				r.changes++
				s.late = false
			}
			r.mu.Unlock()
			return
		}
		fn, fp := s.want, s.wantFP
		s.pending = false
		// Stop and a newer version end it through s.cancel.
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		r.mu.Unlock()

		var err error
		select {
		case sem <- struct{}{}:
			err = r.apply(ctx, s, fn)
			<-sem
		case <-ctx.Done():
			err = ctx.Err()
		}
		cancel()

		r.mu.Lock()
		s.cancel = nil
		if ctx.Err() == nil || s.wantFP == fp {
			// Cancelled for a newer version, the outcome is not this
			// version's to report.
			s.doneFP, s.err = fp, err
		}
		r.mu.Unlock()
	}
}

// fingerprintLocked is what identifies the version of fn that Apply
// wants: the Function, where it was written, and the ConfigMaps and
// Secrets its env names. Holding r.mu.
func (r *Runner) fingerprintLocked(key string, fn *serverlessv1alpha2.Function) string {
	h := sha256.New()
	b, err := json.Marshal(fn)
	if err != nil {
		return "" // no fingerprint: applied every time
	}
	h.Write(b)
	fmt.Fprintf(h, "\x00%s\x00", r.sources[key])
	for _, e := range fn.Spec.Env {
		if e.ValueFrom == nil {
			continue
		}
		var obj any
		switch {
		case e.ValueFrom.ConfigMapKeyRef != nil:
			obj = r.cfg.Objects.ConfigMaps[Key(fn.Namespace, e.ValueFrom.ConfigMapKeyRef.Name)]
		case e.ValueFrom.SecretKeyRef != nil:
			obj = r.cfg.Objects.Secrets[Key(fn.Namespace, e.ValueFrom.SecretKeyRef.Name)]
		default:
			continue
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return ""
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// apply installs and starts one version of a function: the operation of
// its slot s. A version that runs already is only published; one that
// failed before is not tried again; a new one is rolled to, and a
// function that runs no version yet is scaled up to its first replicas.
func (r *Runner) apply(ctx context.Context, s *slot, fn *serverlessv1alpha2.Function) error {
	v, err := r.prepare(ctx, s, fn)
	if err != nil {
		return err
	}
	f, exists := r.current(s.key, v)
	switch {
	case exists && f.specHash == v.hash && !f.idle:
		f.Function, f.Plan, f.Warnings = fn, v.plan, v.warnings
		if f.refused {
			// An edit that failed was undone: what runs is what is
			// wanted, and the failure no longer applies.
			f.refused, f.failedHash, f.failedErr = false, "", nil
			f.Pool.ClearError()
		}
		return r.publish(s, &f, exists)
	case exists && f.failedHash == v.hash:
		// This version failed to start before: not again (each try may
		// take the ready timeout) until it changes.
		f.Function, f.Plan, f.Warnings = fn, v.plan, v.warnings
		if err := r.publish(s, &f, exists); err != nil {
			return err
		}
		return f.failedErr
	}
	if err := f.Pool.Update(ctx, v.spec); err != nil {
		err = errors.New(userPaths(err.Error(), v.spec.RunDir, f.Source))
		if exists {
			f.refused = !f.idle
		} else {
			// Keep it, not running, so its error shows and an edit can fix it.
			f.Function, f.Plan, f.Warnings = fn, v.plan, v.warnings
		}
		if ctx.Err() == nil {
			f.failedHash, f.failedErr = v.hash, err
		}
		if perr := r.publish(s, &f, exists); perr != nil {
			return perr
		}
		return err
	}
	f.Function, f.Plan, f.Warnings, f.specHash, f.refused = fn, v.plan, v.warnings, v.hash, false
	f.failedHash, f.failedErr = "", nil
	f.idle = !exists || f.idle
	if err := r.publish(s, &f, exists); err != nil {
		return err
	}
	if f.idle {
		if err := r.scaleUp(ctx, s, &f, v); err != nil {
			return err
		}
	}
	for _, w := range v.warnings {
		fmt.Fprintf(r.cfg.Log, "%s | kfn: warning: %s\n", s.key, w)
	}
	return nil
}

// version is one version of a function prepared to run: its plan, its
// process spec (files written, dependencies installed) and that spec's
// hash, and the warnings of preparing it.
type version struct {
	plan     plan.Plan
	spec     supervisor.Spec
	hash     string
	warnings []string
}

// prepare plans fn and makes its process spec.
func (r *Runner) prepare(ctx context.Context, s *slot, fn *serverlessv1alpha2.Function) (version, error) {
	p, err := plan.For(fn, r.planConfig())
	if err != nil {
		return version{}, err
	}
	spec, warnings, err := r.spec(ctx, p)
	if err != nil {
		return version{}, err
	}
	return version{plan: p, spec: spec, hash: specHash(spec), warnings: warnings}, nil
}

// current returns a copy of the function key as published (a Function
// others may hold, through Functions and Get, is never changed: its next
// state is published as a copy), or a new one with a pool of its own
// for v, and whether it existed.
func (r *Runner) current(key string, v version) (Function, bool) {
	r.mu.Lock()
	old, exists := r.fns[key]
	source := r.sources[key]
	r.mu.Unlock()
	var f Function
	if exists {
		f = *old
	} else {
		opts := r.cfg.Pool
		opts.OnChange = r.cfg.OnChange
		f = Function{Pool: supervisor.NewPool(key, r.cfg.Log, opts), runDir: v.spec.RunDir}
	}
	f.Source = source
	return f, exists
}

// scaleUp starts the first replicas of f, which runs no version yet (new,
// or its first version failed): its fixed replicas, or minReplicas.
func (r *Runner) scaleUp(ctx context.Context, s *slot, f *Function, v version) error {
	initial := v.plan.Scaling.Replicas
	if v.plan.Scaling.Autoscaled {
		initial = v.plan.Scaling.MinReplicas
	}
	if err := f.Pool.Scale(ctx, int(initial)); err != nil {
		err = errors.New(userPaths(err.Error(), v.spec.RunDir, f.Source))
		if ctx.Err() == nil {
			f.failedHash, f.failedErr = v.hash, err
			_ = r.publish(s, f, true)
		}
		return err
	}
	f.idle = false
	return r.publish(s, f, true)
}

// publish makes f the function's state that Functions and Get return,
// unless its slot s was removed or the runner stopped since: then a pool
// that f made (it did not exist) is stopped, and the error says why.
func (r *Runner) publish(s *slot, f *Function, existed bool) error {
	r.mu.Lock()
	if s.removed || r.stopped {
		r.mu.Unlock()
		if !existed {
			f.Pool.Stop()
		}
		return fmt.Errorf("%s: removed while it was being applied", s.key)
	}
	copied := *f
	r.fns[s.key] = &copied
	r.mu.Unlock()
	return nil
}
