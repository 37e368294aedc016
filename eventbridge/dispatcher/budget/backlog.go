package budget

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
)

// Config is what the budgets hold Subscriptions to, besides each one's
// spec.config (the dispatcher's Config of the same names).
type Config struct {
	// Streams names the event stream and its limits.
	Streams stream.Config
	// NamespaceMaxBacklog and NamespaceMaxBacklogBytes bound the backlog
	// of all of one namespace's Subscriptions together.
	NamespaceMaxBacklog      int
	NamespaceMaxBacklogBytes int64
}

// Backlog is one Subscription's backlog budget: what its last check
// found waiting, how many events are still to be given up, and whether
// its worker should ask for events. Its worker checks it (Check) when the
// budget loop says it is due (Due), and gives up what it finds over
// (TakeExcess).
type Backlog struct {
	cfg       *Config
	js        jetstream.JetStream
	namespace string
	// stream and consumer are the consumer's: the Subscription's in one
	// partition of the event stream.
	stream   string
	consumer string
	delivery v1alpha2.Delivery

	// excess is how many events the budget still gives up: how far the
	// backlog was over maxBacklog at the last check, less what was given
	// up since.
	excess atomic.Int64
	// began and ended count the give-ups ever begun (a path decided to
	// give an event up: TakeExcess, GivingUp) and ended (JetStream
	// confirmed its term: GaveUp, or it was not used: Unused): JetStream
	// counts an event in the backlog until its give-up ended, Check does
	// not (see there).
	began, ended atomic.Int64
	// overBudget is set while the backlog was over maxBacklog at the last
	// check: the worker then asks for no events to deliver, so that the
	// oldest waiting can be reached and given up; changed is told when
	// it changes.
	overBudget atomic.Bool
	changed    chan struct{}
	// overBytes says the last check found the backlog over its bytes,
	// bytesWaiting what it estimated; sampledSize is the mean event size
	// it estimated with, sinceSample the checks since it was read (only
	// the one running check uses these two).
	overBytes    atomic.Bool
	bytesWaiting atomic.Int64
	sampledSize  int64
	sinceSample  int
	// ns is what the namespace's totals know of the Subscription
	// (namespace.go).
	ns namespaceState
	// failed is set when an attempt fails; the budget reads the backlog
	// only after one did, while the sink is not ready, or while over
	// budget, so that healthy Subscriptions cost the broker nothing.
	failed atomic.Bool
	// checking is set while a check runs.
	checking atomic.Bool
	// cons is the consumer the checks read; only the one running check
	// uses it.
	cons jetstream.Consumer
}

// NewBacklog returns the budget of the Subscription of namespace whose
// events wait in consumer of stream (one partition of the event stream),
// held to delivery's maxBacklog and maxBacklogBytes and to cfg's totals;
// it reads the backlog through js. A Subscription has a Backlog in each
// partition, each held to its maxBacklog: the events of one type, or of
// one key, are in one partition.
func NewBacklog(js jetstream.JetStream, cfg *Config, namespace, stream, consumer string, delivery v1alpha2.Delivery) *Backlog {
	return &Backlog{cfg: cfg, js: js, namespace: namespace, stream: stream, consumer: consumer, delivery: delivery, changed: make(chan struct{}, 1)}
}

// Due reports whether the Subscription's backlog is to be read now: an
// attempt failed since the last look (Failed), its sink is not ready,
// it is busy (all of its maxInFlightMessages in flight for a while), it
// is over budget, or its namespace is over its totals. A Subscription
// whose deliveries keep up is not read at all, and counts nothing
// towards its namespace's totals.
func (b *Backlog) Due(ready, busy bool) bool {
	failed := b.failed.Swap(false)
	if ready && !failed && !busy && !b.overBudget.Load() && !b.ns.limited.Load() {
		b.keepingUp()
		return false
	}
	return true
}

// StartCheck reports whether a check may start: none runs. EndCheck
// says it ended.
func (b *Backlog) StartCheck() bool { return b.checking.CompareAndSwap(false, true) }

// EndCheck says the check StartCheck let start ended.
func (b *Backlog) EndCheck() { b.checking.Store(false) }

// Failed says an attempt failed: the next tick reads the backlog.
func (b *Backlog) Failed() { b.failed.Store(true) }

// Over reports whether the backlog was over budget at the last check:
// the worker then asks for no events to deliver. Changed is told when
// that changes.
func (b *Backlog) Over() bool { return b.overBudget.Load() }

// Changed is told when Over changes.
func (b *Backlog) Changed() <-chan struct{} { return b.changed }

// Check reads the Subscription's backlog and sets how many of its
// oldest events are to be given up (the excess, taken with TakeExcess):
// what is over maxBacklog, over maxBacklogBytes (estimated), or over what
// its namespace's totals let it keep. It reports whether any is; false
// also when the consumer cannot be read (the worker's run loop reports a
// missing consumer).
//
// Each dispatcher replica checks on its own; what they give up together
// in one interval can exceed the excess when several hold the
// Subscription's events.
func (b *Backlog) Check(ctx context.Context) bool {
	if b.cons == nil {
		c, err := b.js.Consumer(ctx, b.stream, b.consumer)
		if err != nil {
			return false
		}
		b.cons = c
	}
	// The events being given up that the consumer's answer may count
	// are those whose give-up began before the answer was read and had
	// not ended when it was asked for: at most the give-ups begun by the
	// time of the answer less those ended before the question. That many
	// are subtracted: one that ended meanwhile may not be counted there,
	// and this check then gives up one event less (the next gives it up),
	// never one more. (Read as one count, once, the number could miss a
	// give-up confirmed between the answer and the read, and give up one
	// more than the excess: seen under load.)
	ended := b.ended.Load()
	info, err := b.cons.Info(ctx)
	if err != nil {
		b.cons = nil // look it up again: it may have been recreated
		return false
	}
	settling := b.began.Load() - ended
	backlog := max(int(info.NumPending)+info.NumAckPending-int(settling), 0)
	over := backlog - b.MaxBacklog()
	byBytes, byNamespace := false, false
	n, size := b.bytesOver(ctx, info, backlog)
	if n > max(over, 0) {
		over, byBytes = n, true
	}
	if keep, ok := b.namespaceKeep(); ok && backlog-keep > max(over, 0) {
		over, byBytes, byNamespace = backlog-keep, false, true
	}
	b.overBytes.Store(byBytes)
	b.ns.over.Store(byNamespace)
	// Before any is given up: the namespace's next look counts what is
	// left, not what this check is giving up.
	b.saw(ctx, info, backlog, max(over, 0), size)
	// The excess first, so that an attempt failing from now on is given
	// up rather than kept for a retry newer than the oldest waiting.
	b.excess.Store(int64(max(over, 0)))
	b.setOverBudget(over > 0)
	return over > 0
}

// Fetch pulls up to n of the oldest events waiting, to be given up, from
// the consumer the last Check read.
func (b *Backlog) Fetch(n int) (jetstream.MessageBatch, error) {
	batch, err := b.cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return nil, fmt.Errorf("fetch events over the budget: %w", err)
	}
	return batch, nil
}

// setOverBudget records whether the Subscription is over budget and tells
// Changed when that changes.
func (b *Backlog) setOverBudget(over bool) {
	if b.overBudget.Swap(over) != over {
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
}

// TakeExcess takes one event of the excess the budget gives up, and
// reports whether there was one: the caller then gives its event up and
// calls GaveUp (or Unused, giving it back).
func (b *Backlog) TakeExcess() bool {
	b.began.Add(1) // before the excess is taken: a check in between subtracts it
	for {
		n := b.excess.Load()
		if n <= 0 {
			b.ended.Add(1)
			return false
		}
		if b.excess.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Unused gives back one event TakeExcess took and did not give up.
func (b *Backlog) Unused() {
	b.excess.Add(1)
	b.ended.Add(1)
}

// GivingUp says an event is being given up for another reason than the
// excess (its attempts used up, a verdict): GaveUp follows.
func (b *Backlog) GivingUp() { b.began.Add(1) }

// GaveUp says a give-up that TakeExcess or GivingUp began has ended: its
// event is terminated (or handed back).
func (b *Backlog) GaveUp() { b.ended.Add(1) }

// Excess is how many events the budget still gives up.
func (b *Backlog) Excess() int { return int(b.excess.Load()) }

// Reason is the dead-letter reason of an event given up over budget, and
// why (the sink's state).
func (b *Backlog) Reason(why string) string {
	d := b.delivery
	switch {
	case b.ns.over.Load():
		return b.namespaceReason(why)
	case b.overBytes.Load():
		return fmt.Sprintf("backlog over maxBacklogBytes (%d%s, about %d bytes waiting) and %s: oldest events given up",
			b.maxBacklogBytes(), b.heldBy(d.MaxBacklogBytes, b.maxBacklogBytes()), b.bytesWaiting.Load(), why)
	}
	return fmt.Sprintf("backlog over maxBacklog (%d%s) and %s: oldest events given up",
		b.MaxBacklog(), b.heldBy(int64(d.MaxBacklog), int64(b.MaxBacklog())), why)
}

// MaxBacklog is the Subscription's maxBacklog, held to its namespace's
// total.
func (b *Backlog) MaxBacklog() int {
	return min(b.delivery.MaxBacklog, b.cfg.NamespaceMaxBacklog)
}

// maxBacklogBytes is the Subscription's maxBacklogBytes, held to its
// namespace's total.
func (b *Backlog) maxBacklogBytes() int64 {
	return min(b.delivery.MaxBacklogBytes, b.cfg.NamespaceMaxBacklogBytes)
}

// heldBy says, for a dead-letter reason, when the Subscription's own
// budget of want is held to the namespace's total of have.
func (b *Backlog) heldBy(want, have int64) string {
	if want <= have {
		return ""
	}
	return fmt.Sprintf(", held to namespace %s's total", b.namespace)
}
