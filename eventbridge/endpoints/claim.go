package endpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/contract/claim"
)

// Claimer claims a standby pod for a Function at zero (package
// contract/claim's Client, which asks the controller's leader) and returns
// host:port of its host, which serves the Function when Claim returns.
type Claimer interface {
	Claim(ctx context.Context, namespace, name string) (address string, err error)
}

// ClaimerFunc is a Claimer of a function.
type ClaimerFunc func(ctx context.Context, namespace, name string) (string, error)

// Claim calls f.
func (f ClaimerFunc) Claim(ctx context.Context, namespace, name string) (string, error) {
	return f(ctx, namespace, name)
}

// Defaults of the claims.
const (
	// DefaultClaimHold is how long a claimed pod's address is taken as a
	// ready endpoint of its Function without its EndpointSlice: the slice
	// lists it (labelled as the Function's) well within it.
	DefaultClaimHold = 30 * time.Second
	// claimTimeout bounds one claim.
	claimTimeout = 15 * time.Second
	// claimBackoff is how long after a failed claim a Service is not
	// claimed for again: the requests held for a Function the pool does
	// not serve (or whose pool is empty) ask the controller once in it,
	// not once each.
	claimBackoff = 2 * time.Second
)

// WithClaimer makes Wake claim a standby pod with c for a Function's
// Service that has no ready endpoint, and take the claimed pod's address
// as its ready endpoint at once, for hold (0: DefaultClaimHold) or until
// the Service's EndpointSlices take it as ready, whichever comes first.
func WithClaimer(c Claimer, hold time.Duration) Option {
	return func(w *Watcher) error {
		if c == nil {
			return fmt.Errorf("%w: nil Claimer", ErrInvalidOption)
		}
		if hold <= 0 {
			hold = DefaultClaimHold
		}
		w.claimer, w.claimHold = c, hold
		return nil
	}
}

// Results of a claim, the label of kfn_eventbridge_claims_total.
const (
	claimClaimed   = "claimed"
	claimNotPooled = "not_pooled"
	claimNoStandby = "no_standby"
	claimServed    = "served"
	claimError     = "error"
)

// claimMetrics count the claims by result and time the granted ones.
type claimMetrics struct {
	claims  *prometheus.CounterVec
	seconds prometheus.Histogram
}

// WithMetrics registers the claims' metrics on reg:
// kfn_eventbridge_claims_total{result} (claimed, not_pooled, no_standby,
// served, error) and kfn_eventbridge_claim_seconds (from Wake to the
// granted claim's answer).
func WithMetrics(reg prometheus.Registerer) Option {
	return func(w *Watcher) error {
		if reg == nil {
			return fmt.Errorf("%w: nil registerer", ErrInvalidOption)
		}
		m := &claimMetrics{
			claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_eventbridge_claims_total",
				Help: "Claims of a standby pod for a Function at zero, by result (claimed, not_pooled, no_standby, served, error)."}, []string{"result"}),
			seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kfn_eventbridge_claim_seconds",
				Help:    "Time from a Function's first event or request at zero to the granted claim's answer (its pod serves the Function).",
				Buckets: []float64{.002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5}}),
		}
		for _, r := range []string{claimClaimed, claimNotPooled, claimNoStandby, claimServed, claimError} {
			m.claims.WithLabelValues(r)
		}
		for _, c := range []prometheus.Collector{m.claims, m.seconds} {
			if err := reg.Register(c); err != nil {
				return fmt.Errorf("%w: register claim metrics: %w", ErrInvalidOption, err)
			}
		}
		w.metrics = m
		return nil
	}
}

// count records a claim's result.
func (w *Watcher) count(err error, took time.Duration) {
	if w.metrics == nil {
		return
	}
	r := claimError
	switch {
	case err == nil:
		r = claimClaimed
		w.metrics.seconds.Observe(took.Seconds())
	case errors.Is(err, claim.ErrNotPooled):
		r = claimNotPooled
	case errors.Is(err, claim.ErrNoStandby):
		r = claimNoStandby
	case errors.Is(err, claim.ErrServed):
		r = claimServed
	}
	w.metrics.claims.WithLabelValues(r).Inc()
}

// claimed is the address of a pod claimed for a Service, until when it
// is taken as ready without the Service's slices.
type claimed struct {
	addr  string
	until time.Time
}

// Bounds of each namespace's claims: NamespaceClaimBurst at once, then
// NamespaceClaimsPerSecond. A claim is a request to the controller's
// leader, which every namespace's wakes go through; a namespace of many
// Functions at zero, each sent an event or a request, had one claim each
// every 2 s (the backoff of a failed one), unbounded together. The
// Functions past the bound wake as they would without the pool, on
// KEDA's scale-up.
const (
	NamespaceClaimBurst      = 16
	NamespaceClaimsPerSecond = 4
)

// Wake says that an event or a request waits for namespace/name: when it
// is a Function's Service without a ready endpoint and a Claimer is set,
// a standby pod is claimed for it now (one claim at a time per Service,
// none in the 2 s after one failed, and within its namespace's bounds,
// NamespaceClaimBurst and NamespaceClaimsPerSecond),
// and its address becomes a ready endpoint as soon as the pod's host
// serves the Function, before any EndpointSlice lists it; Ready's
// channel closes then. A claim that fails (the pool does not serve the
// Function, has no standby pod, the controller is away) changes nothing:
// the Function wakes as before, on KEDA's scale-up. Wake returns at once.
func (w *Watcher) Wake(namespace, name string) {
	if w.claimer == nil {
		return
	}
	k := service{namespace, name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, fn := w.fnSlices[k]; !fn || w.ready[k] || w.claiming[k] || w.stopped {
		return
	}
	if next, ok := w.claimAfter[k]; ok {
		if time.Now().Before(next) {
			return
		}
		delete(w.claimAfter, k)
	}
	if !w.claimRates.Allow(namespace) {
		return
	}
	w.claiming[k] = true
	w.notify(k)
	go w.claim(k)
}

// maxClaimWaiters bounds the callers of WakeThen waiting for one claim:
// one per scaler replica's activation in practice; a later one is not
// called (the activations' answers are all alike: the first tells every
// scaler).
const maxClaimWaiters = 16

// WakeThen is Wake, and calls ended, on a goroutine of its own, once the
// claim that Wake started or found under way for namespace/name has
// ended, with whether a pod was given (its address is a ready endpoint
// then); at once, with false, when Wake claims nothing (no Claimer, not a
// Function's Service, a ready endpoint already, within the backoff of a
// failed claim). The scalers hold KEDA's scale-up until then (package
// contract/activation).
func (w *Watcher) WakeThen(namespace, name string, ended func(claimed bool)) {
	w.Wake(namespace, name)
	k := service{namespace, name}
	w.mu.Lock()
	if w.claiming[k] {
		if len(w.claimEnded[k]) < maxClaimWaiters {
			w.claimEnded[k] = append(w.claimEnded[k], ended)
		}
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	go ended(false)
}

// Waking reports whether a standby pod is being claimed for
// namespace/name now: its events may be pulled ahead of its readiness
// (dispatcher.Waking). Ready's channel closes when a claim starts and
// when it ends.
func (w *Watcher) Waking(namespace, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claiming[service{namespace, name}]
}

// claim claims a pod for k and takes its address as ready.
func (w *Watcher) claim(k service) {
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	start := time.Now()
	addr, err := w.claimer.Claim(ctx, k.namespace, k.name)
	if err == nil {
		if _, perr := netip.ParseAddrPort(addr); perr != nil {
			err = fmt.Errorf("claimed address %q: %w", addr, perr)
		}
	}
	w.count(err, time.Since(start))
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.claiming, k)
	w.notify(k) // whatever refresh says below: no longer waking
	for _, ended := range w.claimEnded[k] {
		go ended(err == nil)
	}
	delete(w.claimEnded, k)
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, claim.ErrNotPooled) || errors.Is(err, claim.ErrNoStandby) || errors.Is(err, claim.ErrServed) {
			level = slog.LevelDebug // the Function wakes on KEDA's scale-up, as without the pool
		}
		w.log.Log(ctx, level, "no standby pod claimed for a Function at zero", "namespace", k.namespace, "function", k.name, "error", err)
		w.claimAfter[k] = time.Now().Add(claimBackoff)
		return
	}
	w.log.Info("claimed a standby pod for a Function at zero", "namespace", k.namespace, "function", k.name, "address", addr, "took", time.Since(start))
	c := claimed{addr: addr, until: time.Now().Add(w.claimHold)}
	w.claimed[k] = c
	w.refresh(k)
	time.AfterFunc(w.claimHold, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.claimed[k] == c {
			delete(w.claimed, k)
			w.refresh(k)
		}
	})
}

// dropClaimSeen forgets k's claimed address once its slices take it as
// ready (listed ready, or answered its probe): they carry it from then on.
// w.mu is held.
func (w *Watcher) dropClaimSeen(k service) {
	c, ok := w.claimed[k]
	if ok && (w.early[k][c.addr] || w.listedReady(k, c.addr)) {
		delete(w.claimed, k)
	}
}

// listedReady reports whether a slice of k lists addr as ready. w.mu is
// held.
func (w *Watcher) listedReady(k service, addr string) bool {
	for _, as := range w.addrs[k] {
		for _, a := range as {
			if a == addr {
				return true
			}
		}
	}
	return false
}
