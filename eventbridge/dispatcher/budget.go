package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// maxShedBatch bounds the events one budget check pulls to give up.
const maxShedBatch = 256

// holdBudgets keeps each Subscription's backlog (pending plus
// unacknowledged events of its consumer) within its maxBacklog, and each
// namespace's within its totals (holdNamespaces), until ctx
// ends: every BudgetInterval it checks, on a goroutine of the worker's
// own, each Subscription in whose last interval an attempt failed, whose
// sink had no ready endpoint, that had all of its maxInFlightMessages in
// flight (a slow sink), that was over budget or whose namespace is over
// its totals (checkBudget). A
// Subscription whose deliveries keep up is not read at all: with
// thousands of Subscriptions a read each per interval would load the
// broker for nothing. One loop serves every Subscription, so that an idle
// one costs no timer of its own.
func (d *Dispatcher) holdBudgets(ctx context.Context) {
	tick := time.NewTicker(d.cfg.BudgetInterval)
	defer tick.Stop()
	var workers []*worker
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.mu.Lock()
		workers = workers[:0]
		for _, w := range d.workers {
			workers = append(workers, w)
		}
		d.mu.Unlock()
		d.holdNamespaces(workers)
		for _, w := range workers {
			ready, _ := w.sinkReady()
			failed := w.failed.Swap(false)
			busy := w.saturated()
			if ready && !failed && !busy && !w.overBudget.Load() && !w.nsLimited.Load() {
				w.keepingUp()
				continue
			}
			if !w.checking.CompareAndSwap(false, true) {
				continue // the last check still runs
			}
			if !w.goBusy(func() { defer w.checking.Store(false); w.checkBudget() }) {
				w.checking.Store(false)
			}
		}
	}
}

// checkBudget reads the Subscription's backlog and gives up exactly what is
// over maxBacklog, oldest first: the events that wait in this worker for
// their next attempt (retry.go), then, through the excess the worker's
// other paths take from (takeExcess), failed attempts and events held for
// a sink with no ready endpoint, and the oldest events waiting in the
// stream, pulled here (shed). While over budget the worker asks for no
// events to deliver: JetStream hands out no more than maxInFlightMessages
// unacknowledged events, so a slow or failing sink would otherwise keep
// the oldest waiting out of reach. Given up means dead-lettered with the
// reason (or dropped with deadLetter "false"), so one slow or dead sink
// cannot fill the shared event stream and make publishing fail for every
// Subscription.
//
// Each dispatcher replica checks on its own; what they give up together
// in one interval can exceed the excess when several hold the
// Subscription's events.
func (w *worker) checkBudget() {
	ctx := w.ctx
	t := w.target
	if w.budgetCons == nil {
		c, err := w.d.js.Consumer(ctx, w.d.cfg.Streams.EventStream, t.consumer)
		if err != nil {
			return // the run loop reports a missing consumer
		}
		w.budgetCons = c
	}
	info, err := w.budgetCons.Info(ctx)
	if err != nil {
		w.budgetCons = nil // look it up again: it may have been recreated
		return
	}
	backlog := int(info.NumPending) + info.NumAckPending
	over := backlog - w.maxBacklog()
	byBytes, byNamespace := false, false
	n, size := w.bytesOver(ctx, info, backlog)
	if n > max(over, 0) {
		over, byBytes = n, true
	}
	if keep, ok := w.namespaceKeep(); ok && backlog-keep > max(over, 0) {
		over, byBytes, byNamespace = backlog-keep, false, true
	}
	w.overBytes.Store(byBytes)
	w.overNamespace.Store(byNamespace)
	// Before any is given up: the namespace's next look counts what is
	// left, not what this check is giving up.
	w.saw(ctx, info, backlog, max(over, 0), size)
	// The excess first, so that an attempt failing from now on is given
	// up rather than kept for a retry newer than the oldest waiting.
	w.excess.Store(int64(max(over, 0)))
	w.setOverBudget(over > 0)
	if over <= 0 {
		return
	}
	for w.takeExcess() {
		e := w.retries.takeOldest(1)
		if len(e) == 0 {
			w.excess.Add(1) // not used: the rest is shed
			break
		}
		w.giveUpRetry(ctx, e[0])
	}
	if n := int(w.excess.Load()); n > 0 {
		if err := w.shed(ctx, w.budgetCons, min(n, maxShedBatch)); err != nil && ctx.Err() == nil {
			w.log.Warn("giving up events over the backlog budget failed", "error", err)
		}
	}
}

// saturated reports whether the worker has had all of its
// maxInFlightMessages in flight, or as many bytes of events as its pull
// may hold (pull.Pull.Starved: large events), at this tick and the one
// before: its sink does not keep up with what is published for it (a
// healthy sink may fill them for a moment in a burst).
func (w *worker) saturated() bool {
	full := w.inFlight.Load()+int64(w.retries.len()) >= int64(w.target.delivery.MaxInFlight) ||
		w.pl != nil && w.pl.Starved()
	if !full {
		w.fullTicks = 0
		return false
	}
	w.fullTicks++
	return w.fullTicks >= 2
}

// setOverBudget records whether the Subscription is over budget and tells
// the run loop when that changes.
func (w *worker) setOverBudget(over bool) {
	if w.overBudget.Swap(over) != over {
		select {
		case w.budget <- struct{}{}:
		default:
		}
	}
}

// takeExcess takes one event of the excess the budget gives up, and
// reports whether there was one: the caller then gives its event up.
func (w *worker) takeExcess() bool {
	for {
		n := w.excess.Load()
		if n <= 0 {
			return false
		}
		if w.excess.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// giveUpRetry gives up an event that waited in the worker for its next
// attempt.
func (w *worker) giveUpRetry(ctx context.Context, e *pull.Msg) {
	defer e.Release()
	defer w.heartbeat.Release(e)
	meta, err := e.Metadata()
	if err != nil {
		_ = e.Term()
		return
	}
	w.giveUp(ctx, w.eventLog(e.Headers(), meta), e, meta, 0, w.budgetReason("the sink fails (the event waited for its next attempt)"))
}

// shed pulls up to n of the oldest waiting events and gives up each the
// excess still allows; one it no longer allows (held events took it
// meanwhile) goes the way of any event the worker holds.
func (w *worker) shed(ctx context.Context, cons jetstream.Consumer, n int) error {
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return fmt.Errorf("fetch events over the budget: %w", err)
	}
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			_ = msg.Term()
			continue
		}
		if w.takeExcess() {
			if older := w.retries.takeOlder(meta.Sequence.Stream); older != nil {
				// An event that failed meanwhile is older: it goes first.
				w.giveUpRetry(ctx, older)
			} else {
				w.giveUp(ctx, w.eventLog(msg.Headers(), meta), msg, meta, 0, w.budgetReason(w.overReason()))
				continue
			}
		}
		if !w.goBusy(func() { w.handle(ctx, msg) }) {
			_ = msg.Nak()
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return fmt.Errorf("fetch events over the budget: %w", err)
	}
	return nil
}

// budgetReason is the dead-letter reason of an event given up over budget.
func (w *worker) budgetReason(why string) string {
	d := w.target.delivery
	switch {
	case w.overNamespace.Load():
		return w.namespaceReason(why)
	case w.overBytes.Load():
		return fmt.Sprintf("backlog over maxBacklogBytes (%d%s, about %d bytes waiting) and %s: oldest events given up",
			w.maxBacklogBytes(), w.heldBy(d.MaxBacklogBytes, w.maxBacklogBytes()), w.bytesWaiting.Load(), why)
	}
	return fmt.Sprintf("backlog over maxBacklog (%d%s) and %s: oldest events given up",
		w.maxBacklog(), w.heldBy(int64(d.MaxBacklog), int64(w.maxBacklog())), why)
}

// budgetSamples is how many waiting events a byte estimate reads, and
// sampleEvery how many checks reuse one.
const (
	budgetSamples = 8
	sampleEvery   = 4
)

// bytesOver estimates the bytes of the backlog events waiting for the
// Subscription (JetStream counts them, not their bytes) and returns how
// many events are over maxBacklogBytes, and the mean event size it
// estimated with (0 when it made no estimate). The estimate is the backlog times
// the mean size of budgetSamples events read at sequences spread over it
// (renewed every sampleEvery checks); it is not made while the backlog,
// were every event of the largest size the stream takes, would be within
// the budget.
func (w *worker) bytesOver(ctx context.Context, info *jetstream.ConsumerInfo, backlog int) (int, int64) {
	limit := w.maxBacklogBytes()
	largest := int64(w.d.cfg.Streams.MaxMsgSize)
	if backlog == 0 || limit <= 0 || largest > 0 && int64(backlog)*largest <= limit {
		w.bytesWaiting.Store(0)
		return 0, 0
	}
	if w.sampledSize == 0 || w.sinceSample >= sampleEvery {
		if size := w.sampleEventSize(ctx, info); size > 0 {
			w.sampledSize, w.sinceSample = size, 0
		}
	}
	w.sinceSample++
	size := w.sampledSize
	if size == 0 {
		return 0, 0
	}
	waiting := int64(backlog) * size
	w.bytesWaiting.Store(waiting)
	if waiting <= limit {
		return 0, size
	}
	return int((waiting - limit + size - 1) / size), size
}

// sampleEventSize returns the mean size, data and headers, of up to
// budgetSamples events of the consumer's subjects at sequences spread from
// its acknowledgement floor to the end of the stream; 0 when it could read
// none.
func (w *worker) sampleEventSize(ctx context.Context, info *jetstream.ConsumerInfo) int64 {
	s, err := w.d.js.Stream(ctx, w.d.cfg.Streams.EventStream)
	if err != nil {
		return 0
	}
	subjects := info.Config.FilterSubjects
	if len(subjects) == 0 && info.Config.FilterSubject != "" {
		subjects = []string{info.Config.FilterSubject}
	}
	if len(subjects) == 0 {
		return 0
	}
	lo, hi := info.AckFloor.Stream+1, s.CachedInfo().State.LastSeq
	if i, err := s.Info(ctx); err == nil {
		hi = i.State.LastSeq
	}
	if hi < lo {
		return 0
	}
	var total, n int64
	for i := range budgetSamples {
		seq := lo + (hi-lo)*uint64(i)/uint64(budgetSamples-1)
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subjects[i%len(subjects)]))
		if err != nil {
			continue
		}
		total += int64(len(m.Data))
		for k, vs := range m.Header {
			for _, v := range vs {
				total += int64(len(k) + len(v))
			}
		}
		n++
	}
	if n == 0 {
		return 0
	}
	return total / n
}
