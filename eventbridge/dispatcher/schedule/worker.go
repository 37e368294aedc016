package schedule

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/budget"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/delivery"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/keyorder"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/slots"
	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// worker serves one Subscription: it has the scheduler's puller pull
// from the Subscription's consumer while the sink is ready, and delivers
// each event the puller hands it on a goroutine of the scheduler's, in a
// turn of its namespace's delivery slots.
type worker struct {
	s      *Scheduler
	target target
	// cancel ends the worker's life (stop); done is closed when run
	// returned.
	cancel context.CancelFunc
	done   chan struct{}
	// deliver delivers one event in turn t (nil: outside the delivery
	// slots), and check checks the backlog budget, within the worker's
	// life: made by init from the context the worker was started with,
	// which the puller and the slots, calling Handle and HandleTurn, do
	// not have.
	deliver func(msg jetstream.Msg, t *slots.Turn)
	check   func()
	// pl is the worker's share of the scheduler's puller, added when the
	// worker starts and removed when run returns.
	pl  *pull.Pull
	log *slog.Logger
	// dl delivers the worker's events, rec records them, backlog holds
	// its budget.
	dl      *delivery.Deliverer
	rec     *observe.Record
	backlog *budget.Backlog
	// ackWait is the consumer's ack wait (nanoseconds), read when bound.
	ackWait atomic.Int64
	// heartbeat keeps the events the worker holds in progress.
	heartbeat pull.Heartbeat
	// retries are the events waiting for their next attempt.
	retries delivery.Retries
	// space is the worker's namespace's part of the delivery slots,
	// joined when the worker starts and left when it ends.
	space *slots.Space
	// inFlight counts the events in handleIn: waiting for the sink, or in
	// delivery.
	inFlight atomic.Int64
	// gate holds the deliveries of the Subscription's workers of every
	// partition to its maxInFlightMessages; nil with one partition.
	gate inFlightGate
	// order holds the events of an ordered Subscription by key (see
	// order.go); nil for one that is not ordered. session is the session
	// of the last event it was given, opening says a wait to open it
	// runs, open runs it (made by init); session and opening are guarded
	// by mu.
	order   *keyorder.Order[*pull.Msg]
	session pull.Session
	opening bool
	open    func()
	// fullTicks counts the budget loop's ticks in a row at which all of
	// the worker's maxInFlightMessages were in flight; only that loop
	// uses it.
	fullTicks int

	// mu guards closing and the start of work counted by busy: deliveries
	// and budget checks, which run waits for before it returns.
	mu      sync.Mutex
	closing bool
	busy    sync.WaitGroup
}

// init sets what the worker's goroutines read, before any starts; its
// deliveries and checks run within ctx.
func (w *worker) init(ctx context.Context) {
	t := w.target
	p := w.s.parts
	w.log = p.Log.With("namespace", t.sub.Namespace, "subscription", t.sub.Name, "function", t.sink.Service, "consumer", t.consumer)
	if t.partition > 0 {
		w.log = w.log.With("stream", t.stream)
	}
	w.rec = p.Recorder.For(t.sub.Namespace, t.sub.Name, t.sink.Namespace, t.sink.Service)
	w.dl = p.Sender.For(t.sub.Namespace, t.sub.Name, t.sink, t.delivery, w.rec, w.log)
	w.backlog = budget.NewBacklog(w.s.js, &w.s.cfg.Budget, t.sub.Namespace, t.stream, t.consumer, t.delivery)
	w.ackWait.Store(int64(stream.DefaultAckWait))
	w.deliver = func(msg jetstream.Msg, turn *slots.Turn) { w.handleIn(ctx, msg, turn) }
	w.check = func() { w.checkBudget(ctx) }
	if t.delivery.Ordered && t.invalid == nil {
		w.order = keyorder.New[*pull.Msg](t.delivery.MaxInFlight)
		w.open = func() { w.openWhenAllHeld(ctx) }
	}
}

// beatEvery is how often the events the worker holds are told in
// progress: half the consumer's ack wait.
func (w *worker) beatEvery() time.Duration {
	return max(time.Duration(w.ackWait.Load())/2, 10*time.Millisecond)
}

// stop asks the worker to stop; it does not wait.
func (w *worker) stop() {
	if w.cancel != nil {
		w.cancel()
	}
}

// goBusy runs f on a goroutine of the scheduler's (goroutines) that run
// waits for, unless the worker is closing; it reports whether f runs.
func (w *worker) goBusy(f func()) bool {
	if !w.startBusy() {
		return false
	}
	w.s.goroutines.Go(pull.TaskFunc(func() {
		defer w.busy.Done()
		f()
	}))
	return true
}

// Take delivers m on a goroutine of the scheduler's that run waits for
// (m.Run calls Handle), in a turn of its namespace's (package slots),
// unless the worker is closing: then the event is left to come again
// after its ack wait. An ordered Subscription's event waits behind its
// key first (takeInOrder). The worker is its pull's pull.Handler.
func (w *worker) Take(m *pull.Msg) bool {
	if w.order != nil {
		return w.takeInOrder(m)
	}
	return w.takeNow(m)
}

// takeNow is Take of an event that waits for nothing but its turn.
func (w *worker) takeNow(m *pull.Msg) bool {
	if !w.startBusy() {
		return false
	}
	w.s.slots.Submit(w, w.space, m)
	return true
}

// Handle delivers an event Take took, or one retried (retryLater),
// outside the delivery slots: what pull.Handler asks for (Msg.Run). The
// worker's own events go in turns (HandleTurn).
func (w *worker) Handle(m *pull.Msg) {
	defer w.busy.Done()
	w.deliver(m, nil)
}

// HandleTurn delivers an event Take took, or one retried, in its turn of
// the delivery slots.
func (w *worker) HandleTurn(t *slots.Turn) {
	defer w.busy.Done()
	w.deliver(t.Msg(), t)
}

var (
	_ pull.Handler  = (*worker)(nil)
	_ slots.Handler = (*worker)(nil)
)

// startBusy counts work that run waits for, unless the worker is closing;
// it reports whether the work may start.
func (w *worker) startBusy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false
	}
	w.busy.Add(1)
	return true
}

const (
	minRebind = 50 * time.Millisecond
	maxRebind = 5 * time.Second
)

// run binds to the consumer and has it pulled while the sink is ready,
// until ctx is done; then it waits for the deliveries in progress.
func (w *worker) run(ctx context.Context) {
	t := w.target
	defer w.close()
	pl := w.pl
	defer pl.Remove() // before the wait in close: no delivery starts after it
	wait := minRebind
	// bound: the consumer was looked up, and has not been lost since. A
	// sink that is ready again (a Function woken from zero) is pulled for
	// at once, without asking JetStream for the consumer again: a lost
	// consumer is told by the pull itself (pl.Lost). A sink not ready
	// when the worker starts has its consumer looked up then, once, so
	// that its first wake does not wait for that round trip either (the
	// consumer's leader answers it, another server maybe).
	bound, early := false, false
	for ctx.Err() == nil {
		ready, changed := w.sinkReady()
		if !ready && !bound && !early {
			early = true
			bound = w.bind(ctx) == nil // a failure is retried once the sink is ready
			continue
		}
		pulling := ready || w.sinkWaking()
		if !pulling || w.backlog.Over() {
			if !pulling {
				w.log.Debug("sink has no ready endpoint, not pulling", "service", t.sink.Service)
			}
			select {
			case <-changed:
			case <-w.backlog.Changed():
			case <-ctx.Done():
			}
			continue
		}
		var err error
		if !bound {
			if err = w.bind(ctx); err == nil {
				bound = true
			}
		}
		if err == nil {
			err = w.pullWhileReady(ctx, pl, changed)
		}
		if err == nil {
			wait = minRebind
			continue
		}
		bound = false
		if ctx.Err() != nil {
			return
		}
		level := slog.LevelWarn
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, pull.ErrConsumerGone) || errors.Is(err, jetstream.ErrStreamNotFound) {
			// The reconciler has not created it (again) yet, or its
			// partition is not made yet or was drained and deleted.
			level = slog.LevelDebug
		}
		w.log.Log(ctx, level, "consumer unavailable, retrying", "error", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(wait*2, maxRebind)
	}
}

// bind looks the worker's consumer up, and takes its ack wait.
func (w *worker) bind(ctx context.Context) error {
	cons, err := w.s.js.Consumer(ctx, w.target.stream, w.target.consumer)
	if err != nil {
		return err
	}
	if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		w.ackWait.Store(int64(info.Config.AckWait))
	}
	return nil
}

// close ends the worker once run's loop ended: no work starts any more,
// its retries go back to JetStream, its waiting turns end without a slot,
// and it waits for the work in progress before it leaves its slots.
func (w *worker) close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	if w.order != nil {
		// The events waiting behind their keys go back by sequence; those
		// started settle or go back below, and whoever holds the
		// consumer's events next waits for all of them (order.go).
		w.handBackAll(w.order.Drain())
	}
	for e, left := range w.retries.Close() {
		if w.order != nil {
			// Whoever holds an ordered consumer's events next starts none
			// before this one is back: not after the rest of its backoff
			// (backoffMax may be an hour), but at once.
			left = 0
		}
		w.handBack(e, left)
	}
	w.s.slots.Drop(w, w.space) // its waiting turns end now, without a slot
	w.busy.Wait()
	w.s.slots.Leave(w.space)
	// Every event it held is settled or handed back by now. One that is
	// not (a bug) must not be kept in progress by a worker that is gone:
	// it comes again after its ack wait.
	if n := w.heartbeat.Forget(); n > 0 {
		w.log.Error("a stopped worker still held events; they come again after their ack wait", "events", n)
	}
}

// pullWhileReady has the consumer pulled until ctx is done or the sink stops being
// ready or waking (nil), or the consumer goes away (the error). A
// notification that leaves the sink ready (for another Service, or a
// change of endpoints that keeps one ready) changes nothing. When the sink
// is neither ready nor waking the pull pauses: events already asked for
// still come to handle, which waits for readiness without spending
// attempts, and no more are asked for.
func (w *worker) pullWhileReady(ctx context.Context, pl *pull.Pull, changed <-chan struct{}) error {
	pl.Start()
	defer pl.Pause()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-pl.Lost():
			return err
		case <-w.backlog.Changed():
			if w.backlog.Over() {
				return nil // over budget: ask for nothing more until within it
			}
		case <-changed:
			ready, next := w.sinkReady()
			if !ready && !w.sinkWaking() {
				return nil
			}
			changed = next
		}
	}
}

// sinkReady reports whether the worker's sink has a ready endpoint; the
// channel closes when that may have changed. The sink of a Subscription
// that cannot be served is never ready (and the channel never closes).
func (w *worker) sinkReady() (bool, <-chan struct{}) {
	if w.target.invalid != nil {
		return false, nil
	}
	return w.s.parts.Endpoints.Ready(w.target.sink.Namespace, w.target.sink.Service)
}

// sinkWaking reports whether the worker's sink, not ready, is being given
// a ready endpoint now (Waking): its events are pulled ahead of it.
func (w *worker) sinkWaking() bool {
	wk, ok := w.s.parts.Endpoints.(Waking)
	return ok && w.target.invalid == nil && wk.Waking(w.target.sink.Namespace, w.target.sink.Service)
}

// overReason says why the worker's events are over budget.
func (w *worker) overReason() string {
	if ready, _ := w.sinkReady(); ready {
		return "the sink does not keep up"
	}
	return w.notReadyReason()
}

// notReadyReason says why the worker's sink is not ready.
func (w *worker) notReadyReason() string {
	if w.target.invalid != nil {
		return "the Subscription's spec has errors (" + w.target.invalid.Error() + ")"
	}
	return "the sink has no ready endpoint"
}

// readiness is why waitReady returned.
type readiness int

const (
	ready readiness = iota
	stopping
	overBudget
)

// waitReady waits until the sink is ready, ctx is done (stopping), or the
// Subscription is over its backlog budget while the sink is not ready.
func (w *worker) waitReady(ctx context.Context) readiness {
	var poll <-chan time.Time
	for {
		ok, changed := w.sinkReady()
		if ok {
			return ready
		}
		if w.backlog.TakeExcess() {
			return overBudget
		}
		if poll == nil {
			t := time.NewTicker(w.s.cfg.BudgetInterval)
			defer t.Stop()
			poll = t.C
		}
		select {
		case <-changed:
		case <-poll:
		case <-ctx.Done():
			return stopping
		}
	}
}
