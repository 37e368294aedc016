package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxShedBatch bounds the events one budget check pulls to give up.
const maxShedBatch = 256

// holdBudgets keeps each Subscription's backlog (pending plus
// unacknowledged events of its consumer) within its maxBacklog until ctx
// ends: every BudgetInterval it checks, on a goroutine of the worker's
// own, each Subscription in whose last interval an attempt failed, whose
// sink had no ready endpoint or that was over budget (checkBudget). A
// Subscription whose deliveries succeed is not read at all: the budget
// only ever gives up events whose sink fails or is gone, and with
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
		for _, w := range workers {
			ready, _ := w.sinkReady()
			failed := w.failed.Swap(false)
			if ready && !failed && !w.overBudget.Load() {
				continue
			}
			if !w.checking.CompareAndSwap(false, true) {
				continue // the last check still runs
			}
			if !w.goBusy(func() { defer w.checking.Store(false); w.checkBudget(ready) }) {
				w.checking.Store(false)
			}
		}
	}
}

// checkBudget reads the Subscription's backlog and marks the worker over
// budget or not. While over budget, handle gives up a failed attempt at
// once instead of retrying it, and gives up the events it holds for a
// sink with no ready endpoint; and when the sink has no ready endpoint
// (nothing is pulled then), the oldest waiting events are pulled here and
// given up, down to the budget. Given up means dead-lettered with the
// reason (or dropped with deadLetter "false"), so one dead sink cannot
// fill the shared event stream and make publishing fail for every
// Subscription.
func (w *worker) checkBudget(ready bool) {
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
	over := backlog - t.delivery.MaxBacklog
	w.overBudget.Store(over > 0)
	if over <= 0 || ready {
		return // deliveries run: failed attempts are given up at once
	}
	if err := w.shed(ctx, w.budgetCons, min(over, maxShedBatch)); err != nil && ctx.Err() == nil {
		w.log.Warn("giving up events over the backlog budget failed", "error", err)
	}
}

// shed pulls up to n of the oldest waiting events and gives them up.
func (w *worker) shed(ctx context.Context, cons jetstream.Consumer, n int) error {
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return fmt.Errorf("fetch events over the budget: %w", err)
	}
	reason := w.budgetReason(w.notReadyReason())
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			_ = msg.Term()
			continue
		}
		w.giveUp(ctx, w.eventLog(msg.Headers(), meta), msg, meta, 0, reason)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return fmt.Errorf("fetch events over the budget: %w", err)
	}
	return nil
}

// budgetReason is the dead-letter reason of an event given up over budget.
func (w *worker) budgetReason(why string) string {
	return fmt.Sprintf("backlog over maxBacklog (%d) and %s: oldest events given up", w.target.delivery.MaxBacklog, why)
}
