package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher/budget"
	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// maxShedBatch bounds the events one budget check pulls to give up.
const maxShedBatch = 256

// shedAtOnce bounds the events a budget check gives up at once: each
// give-up waits for JetStream twice (the dead letter stored, the event
// terminated), and one at a time a Subscription whose events are
// published faster than that, to a sink that takes none, would fill the
// event stream for every namespace however soon its budget acted.
const shedAtOnce = 8

// holdBudgets keeps each Subscription's backlog (pending plus
// unacknowledged events of its consumer) within its maxBacklog, and each
// namespace's within its totals (budget.HoldNamespaces), until ctx ends:
// every BudgetInterval it checks, on a goroutine of the worker's own,
// each Subscription in whose last interval an attempt failed, whose sink
// had no ready endpoint, that had all of its maxInFlightMessages in
// flight (a slow sink), that was over budget or whose namespace is over
// its totals (checkBudget). A Subscription whose deliveries keep up is
// not read at all: with thousands of Subscriptions a read each per
// interval would load the broker for nothing. One loop serves every
// Subscription, so that an idle one costs no timer of its own.
func (s *Scheduler) holdBudgets(ctx context.Context) {
	tick := time.NewTicker(s.cfg.BudgetInterval)
	defer tick.Stop()
	var workers []*worker
	var backlogs []*budget.Backlog
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		workers, backlogs = workers[:0], backlogs[:0]
		for _, w := range s.workers {
			workers = append(workers, w)
			backlogs = append(backlogs, w.backlog)
		}
		s.mu.Unlock()
		budget.HoldNamespaces(&s.cfg.Budget, backlogs)
		for _, w := range workers {
			ready, _ := w.sinkReady()
			if !w.backlog.Due(ready, w.saturated()) || !w.backlog.StartCheck() {
				continue // keeping up, or the last check still runs
			}
			if !w.goBusy(func() { defer w.backlog.EndCheck(); w.check() }) {
				w.backlog.EndCheck()
			}
		}
	}
}

// checkBudget reads the Subscription's backlog (budget.Backlog.Check) and
// gives up exactly what is over its budget, oldest first: the events that
// wait in this worker for their next attempt (delivery.Retries), then, through
// the excess the worker's other paths take from (TakeExcess), failed
// attempts and events held for a sink with no ready endpoint, and the
// oldest events waiting in the stream, pulled here (shed). While over
// budget the worker asks for no events to deliver: JetStream hands out no
// more than maxInFlightMessages unacknowledged events, so a slow or
// failing sink would otherwise keep the oldest waiting out of reach.
// Given up means dead-lettered with the reason (or dropped with
// deadLetter "false"), so one slow or dead sink cannot fill the shared
// event stream and make publishing fail for every Subscription.
func (w *worker) checkBudget(ctx context.Context) {
	if !w.backlog.Check(ctx) {
		return
	}
	for w.backlog.TakeExcess() {
		e := w.retries.TakeOldest(1)
		if len(e) == 0 {
			w.backlog.Unused() // not used: the rest is shed
			break
		}
		w.giveUpRetry(ctx, e[0])
		w.backlog.GaveUp()
	}
	if n := w.backlog.Excess(); n > 0 {
		if err := w.shed(ctx, min(n, maxShedBatch)); err != nil && ctx.Err() == nil {
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
	full := w.inFlight.Load()+int64(w.retries.Len()) >= int64(w.target.delivery.MaxInFlight) ||
		w.pl != nil && w.pl.Starved()
	if !full {
		w.fullTicks = 0
		return false
	}
	w.fullTicks++
	return w.fullTicks >= 2
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
	w.dl.GiveUp(ctx, w.dl.EventLog(e.Headers(), meta), e, meta, 0, w.backlog.Reason("the sink fails (the event waited for its next attempt)"))
}

// shed pulls up to n of the oldest waiting events and gives up each the
// excess still allows, shedAtOnce side by side, and returns once they are
// given up; one it no longer allows (held events took it meanwhile) goes
// the way of any event the worker holds.
func (w *worker) shed(ctx context.Context, n int) error {
	batch, err := w.backlog.Fetch(n)
	if err != nil {
		return err
	}
	var giving sync.WaitGroup
	defer giving.Wait()
	slots := make(chan struct{}, shedAtOnce)
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			_ = msg.Term()
			continue
		}
		if w.backlog.TakeExcess() {
			if older := w.retries.TakeOlder(meta.Sequence.Stream); older != nil {
				// An event that failed meanwhile is older: it goes first.
				w.giveUpRetry(ctx, older)
				w.backlog.GaveUp()
			} else {
				reason := w.backlog.Reason(w.overReason())
				slots <- struct{}{}
				giving.Go(func() {
					defer func() { <-slots }()
					w.dl.GiveUp(ctx, w.dl.EventLog(msg.Headers(), meta), msg, meta, 0, reason)
					w.backlog.GaveUp()
				})
				continue
			}
		}
		if !w.goBusy(func() { w.handleIn(ctx, msg, nil) }) {
			_ = msg.Nak()
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return fmt.Errorf("fetch events over the budget: %w", err)
	}
	return nil
}
