package activity

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Errors a [Scaler] answers with; test them with errors.Is.
var (
	// ErrInvalidOption is wrapped by every error an [Option] returns.
	ErrInvalidOption = errors.New("invalid option")
	// ErrNotReady means no refresh has completed yet.
	ErrNotReady = errors.New("scaler: no backlog read yet")
	// ErrConsumerNotFound means a Subscription feeding the Function has no
	// JetStream consumer.
	ErrConsumerNotFound = errors.New("consumer not found")
	// ErrBacklogUnavailable means JetStream could not be asked (NATS
	// unreachable, stream missing, timeout).
	ErrBacklogUnavailable = errors.New("backlog unavailable")
)

// BacklogReader reads the backlog of every consumer of the event stream in
// one go.
type BacklogReader interface {
	// Backlogs returns num_pending + num_ack_pending of every consumer of the
	// event stream, by consumer name. A consumer absent from the map does
	// not exist.
	Backlogs(ctx context.Context) (map[string]uint64, error)
}

// Listener watches subjects for published messages.
type Listener interface {
	// Listen calls fire, from any goroutine, when a message is published on
	// one of subjects (which may hold NATS wildcards), until stop is called.
	// fire may be called more than once. stop is safe to call more than
	// once and after the listener already gave up.
	Listen(subjects []string, fire func()) (stop func(), err error)
}

// State is what the scaler knows about one Function.
type State struct {
	// Backlog is the number of events waiting for the Function (pending
	// and unacknowledged), as of the last refresh.
	Backlog uint64
	// InFlight is the number of requests for the Function in the gateway
	// now, held ones included.
	InFlight int
	// Active reports whether the Function has work (see the package doc).
	Active bool
}

// Scaler tracks the backlog and activity of Functions. Create it with
// [New]; its methods are safe for concurrent use.
type Scaler struct {
	reader   BacklogReader
	listener Listener
	o        options

	mu        sync.Mutex
	functions map[types.NamespacedName]*function
	subs      map[types.NamespacedName]Binding // by Subscription
	sources   map[string]*source               // gateway in-flight reports, by source
	refreshed bool                             // a refresh has completed
	// The namespaces past their bound of listened subjects, and whether
	// the total bound was reached, at the last refresh (to log changes).
	overNamespaces map[string]bool
	overTotal      bool
}

type function struct {
	key      types.NamespacedName
	subs     map[types.NamespacedName]Binding
	backlog  uint64
	err      error
	active   bool
	signalAt time.Time
	watchers map[chan struct{}]struct{}

	stopListen    func() // non-nil while listening
	listenSubject string // the subjects listened to, joined
	// consumerMissing says that the last refresh that read the backlog
	// found a consumer of fn's missing: fn can be delivered nothing, and
	// is not listened for.
	consumerMissing bool
	// listenable says that the last refresh found fn within the bounds
	// of listened subjects (WithListenBounds).
	listenable bool

	// held says that the watchers are not yet told of the last
	// activation: a standby pod is being claimed for the Function
	// (WithClaimHold); holdTimer tells them once the hold's bound passes.
	held      bool
	holdTimer *time.Timer
}

type source struct {
	counts  map[types.NamespacedName]int
	expires time.Time
}

// New returns a Scaler that reads backlogs with reader and, while a Function
// is inactive, listens on its subjects with listener (nil: activation is
// found by the refresh loop and gateway reports only). Call [Scaler.Run] to
// start refreshing.
func New(reader BacklogReader, listener Listener, opts ...Option) (*Scaler, error) {
	if reader == nil {
		return nil, fmt.Errorf("%w: nil BacklogReader", ErrInvalidOption)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	return &Scaler{
		reader:    reader,
		listener:  listener,
		o:         o,
		functions: map[types.NamespacedName]*function{},
		subs:      map[types.NamespacedName]Binding{},
		sources:   map[string]*source{},
	}, nil
}

// Run refreshes every refresh interval until ctx ends, then stops every
// listener and returns nil. A failed refresh is logged and recorded on the
// Functions it concerns; Run goes on.
func (s *Scaler) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.interval)
	defer t.Stop()
	for {
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.o.log.Warn("refresh failed", "error", err)
		}
		select {
		case <-ctx.Done():
			s.stopListeners()
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads every backlog now, updates every Function, and starts or
// stops listeners accordingly. Run calls it every refresh interval; tests
// call it to step the scaler deterministically. The error, wrapping
// ErrBacklogUnavailable, says the backlog could not be read; it is also what
// every Function with Subscriptions answers until a refresh succeeds.
func (s *Scaler) Refresh(ctx context.Context) error {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.o.readTimeout)
	backlogs, readErr := s.reader.Backlogs(rctx)
	cancel()
	if readErr != nil {
		readErr = fmt.Errorf("%w: %w", ErrBacklogUnavailable, readErr)
	}
	s.o.metrics.observeRefresh(time.Since(start), readErr)

	s.mu.Lock()
	now := time.Now()
	for name, src := range s.sources {
		if now.After(src.expires) {
			delete(s.sources, name)
		}
	}
	inflight := s.inFlightLocked()
	var toStop []func()
	activeCount := 0
	for key, fn := range s.functions {
		fn.err = nil
		switch {
		case len(fn.subs) == 0:
			fn.backlog, fn.consumerMissing = 0, false
		case readErr != nil:
			fn.err = readErr // whether its consumers exist stays as last read
		default:
			fn.backlog, fn.err = sumBacklog(fn, backlogs)
			fn.consumerMissing = errors.Is(fn.err, ErrConsumerNotFound)
		}
		busy := inflight[key] > 0 || (fn.err == nil && fn.backlog > 0) ||
			fn.signalAt.After(start.Add(-s.o.hold))
		switch {
		case busy && !fn.active:
			toStop = append(toStop, s.activateLocked(fn, "backlog"))
		case !busy && fn.active && fn.err == nil:
			fn.active = false
		}
		if fn.active {
			activeCount++
		}
		if len(fn.subs) == 0 && len(fn.watchers) == 0 && !fn.active && inflight[key] == 0 {
			toStop = append(toStop, fn.detachListener())
			delete(s.functions, key)
		}
	}
	toListen, stops := s.planListenersLocked()
	toStop = append(toStop, stops...)
	s.refreshed = true
	s.o.metrics.setFunctions(len(s.functions), activeCount)
	s.mu.Unlock()

	for _, stop := range toStop {
		if stop != nil {
			stop()
		}
	}
	s.listen(toListen)
	return readErr
}

// signal records work for a Function seen outside a refresh.
func (s *Scaler) signal(key types.NamespacedName, why string) {
	s.mu.Lock()
	fn := s.functionLocked(key)
	fn.signalAt = time.Now()
	var stop func()
	if !fn.active {
		stop = s.activateLocked(fn, why)
	}
	s.mu.Unlock()
	if stop != nil {
		go stop() // may run on the listener's own goroutine
	}
}

// activateLocked turns fn active, tells its watchers and returns the stop
// function of its listener, to be called without the lock.
func (s *Scaler) activateLocked(fn *function, why string) func() {
	fn.active = true
	if s.o.activated != nil && s.o.claimHold > 0 {
		// The event bridges claim a standby pod for fn now (they hear of
		// the activation from s.o.activated): KEDA's scale-up, and the
		// API server's, the controllers' and the kubelet's work behind
		// it, would take the node's CPU from the claim and the first
		// delivery, which need no Deployment. The watchers are told
		// once the claim ended (ClaimEnded) or the hold's bound passed.
		if fn.holdTimer != nil {
			fn.holdTimer.Stop()
		}
		fn.held = true
		fn.holdTimer = time.AfterFunc(s.o.claimHold, func() { s.release(fn, releasedByBound) })
	} else {
		s.announceLocked(fn)
	}
	s.o.metrics.activation(why)
	if f := s.o.activated; f != nil {
		go f(fn.key)
	}
	s.o.log.Info("function active", "namespace", fn.key.Namespace, "function", fn.key.Name, "cause", why)
	return fn.detachListener()
}

// announceLocked tells fn's watchers that it is active.
func (s *Scaler) announceLocked(fn *function) {
	for ch := range fn.watchers {
		select {
		case ch <- struct{}{}:
		default: // an announcement is already pending
		}
	}
}

func (s *Scaler) functionLocked(key types.NamespacedName) *function {
	fn, ok := s.functions[key]
	if !ok {
		fn = &function{key: key, subs: map[types.NamespacedName]Binding{}, watchers: map[chan struct{}]struct{}{}}
		s.functions[key] = fn
	}
	return fn
}

func (s *Scaler) inFlightLocked() map[types.NamespacedName]int {
	total := map[types.NamespacedName]int{}
	now := time.Now()
	for _, src := range s.sources {
		if now.After(src.expires) {
			continue
		}
		for fn, n := range src.counts {
			total[fn] += n
		}
	}
	return total
}

// State returns what the scaler knows about the Function fn. The error
// wraps ErrNotReady before the first refresh, and, for a Function with
// Subscriptions, ErrConsumerNotFound or ErrBacklogUnavailable when the last
// refresh could not read its backlog. A Function the scaler has never heard
// of has a zero State.
func (s *Scaler) State(fn types.NamespacedName) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refreshed {
		return State{}, ErrNotReady
	}
	inflight := s.inFlightLocked()[fn]
	f, ok := s.functions[fn]
	if !ok {
		return State{InFlight: inflight, Active: inflight > 0}, nil
	}
	if f.err != nil {
		return State{}, f.err
	}
	return State{Backlog: f.backlog, InFlight: inflight, Active: f.active}, nil
}

// Watch registers a watcher of the Function fn. It returns whether fn is
// active now, and a channel that receives a value after each later
// inactive->active transition of fn (transitions that happen while a value
// is still unread are merged into it). cancel unregisters the watcher; it
// is safe to call more than once. The channel is never closed.
func (s *Scaler) Watch(fn types.NamespacedName) (active bool, ch <-chan struct{}, cancel func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	f := s.functionLocked(fn)
	f.watchers[c] = struct{}{}
	active = f.active && !f.held
	s.o.metrics.watchers(1)
	s.mu.Unlock()
	var once sync.Once
	return active, c, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(f.watchers, c)
			s.o.metrics.watchers(-1)
			s.mu.Unlock()
		})
	}
}

// ReportInFlight replaces what the gateway instance named src reported
// before: counts holds its requests in flight per Function (held ones
// included; zero or missing means none), valid for ttl, after which they
// count no more unless reported again. A Function that is inactive and gets
// requests becomes active at once.
func (s *Scaler) ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration) {
	c := make(map[types.NamespacedName]int, len(counts))
	for fn, n := range counts {
		if n > 0 {
			c[fn] = n
		}
	}
	var stops []func()
	s.mu.Lock()
	if len(c) == 0 {
		delete(s.sources, src)
	} else {
		s.sources[src] = &source{counts: c, expires: time.Now().Add(ttl)}
	}
	for key := range c {
		fn := s.functionLocked(key)
		fn.signalAt = time.Now()
		if !fn.active {
			stops = append(stops, s.activateLocked(fn, "request"))
		}
	}
	s.mu.Unlock()
	for _, stop := range stops {
		if stop != nil {
			stop()
		}
	}
}

// Upsert adds or replaces the Binding of sub (see [BindingFor]); one whose
// Function changed moves to the new Function. An invalid Subscription (its
// sink or types) feeds no Function: it is forgotten and the error says why.
// With Remove, it makes the Scaler a target of the event bridge's
// feed.Feeder (in a cluster) and subscription.Set (kfn dev).
func (s *Scaler) Upsert(sub *eventingv1alpha2.Subscription) error {
	b, err := BindingFor(sub)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteSubscriptionLocked(types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name})
	if err != nil {
		return err
	}
	s.subs[b.Subscription] = b
	s.functionLocked(b.Function).subs[b.Subscription] = b
	return nil
}

// Remove forgets the Subscription namespace/name; an unknown one is not an
// error.
func (s *Scaler) Remove(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteSubscriptionLocked(types.NamespacedName{Namespace: namespace, Name: name})
}

func (s *Scaler) deleteSubscriptionLocked(sub types.NamespacedName) {
	old, ok := s.subs[sub]
	if !ok {
		return
	}
	delete(s.subs, sub)
	if fn, ok := s.functions[old.Function]; ok {
		delete(fn.subs, sub)
	}
}

func sumBacklog(fn *function, backlogs map[string]uint64) (uint64, error) {
	var sum uint64
	var missing []string
	for _, b := range fn.subs {
		n, ok := backlogs[b.Consumer]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (Subscription %s)", b.Consumer, b.Subscription))
			continue
		}
		sum += n
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return 0, fmt.Errorf("function %s: %w: %s", fn.key, ErrConsumerNotFound, strings.Join(missing, ", "))
	}
	return sum, nil
}
