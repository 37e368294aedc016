package schedule

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// How an ordered Subscription's worker (ordering partitionkey) keeps the
// events of a key in order.
//
// The consumer is pinned to one client at a time (pull.Puller.AddPinned), so
// that one worker, of one replica, holds its events; the worker's
// keyorder.Order starts an event once the events of its key before it
// are settled, and at most maxInFlightMessages at once. An event failing
// is kept for its next attempt (retryLater), its key's events behind it.
//
// What JetStream does not keep in order is what it hands out again: an
// event handed out before (to another replica that held the pin, to a
// worker of this one that stopped, or lost with a connection) comes again
// only after its ack wait, or once handed back, after events handed out
// later. So the worker starts nothing of a new session of its consumer
// (another pin, or a reconnect: pull.Session) before every event the
// consumer has handed out and not had settled is in its hands: its Order
// is closed at each new session, and opened once the consumer's ack
// pending is at most what the Order holds, counted before the consumer
// was asked and unchanged after (keyorder.Order.Open), and while none of
// its events is in delivery. The events that came again then take their
// place by stream sequence.

// partitionKey is the key an ordered Subscription keeps msg's order by:
// its CloudEvents extension partitionkey ("" when it has none: not
// ordered).
func partitionKey(msg jetstream.Msg) string {
	return eventstore.Attribute(msg.Headers(), eventstore.PartitionKeyExtension)
}

// takeInOrder holds m, which the puller hands over, in the worker's
// Order, and submits what starts (Take, under the puller's lock). A new
// session closes the Order until every event the consumer handed out is
// held (openWhenAllHeld). It reports whether m was taken: not when the
// worker closes, nor when m is a copy of an event held.
func (w *worker) takeInOrder(m *pull.Msg) bool {
	meta, err := m.Metadata()
	if err != nil {
		return w.takeNow(m) // handleIn terminates it
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false
	}
	if s := m.Session(); s != w.session {
		w.session = s
		w.order.Close()
		w.openLocked()
	} else if !w.opening && !w.order.IsOpen() {
		w.openLocked() // closed, and nothing opens it: the first message, say
	}
	start, duplicate := w.order.Add(partitionKey(m), meta.Sequence.Stream, m)
	if duplicate {
		return false
	}
	// Keep it ours while it waits behind its key.
	w.heartbeat.Hold(m, w.beatEvery())
	w.submitLocked(start)
	return true
}

// submitLocked submits events the Order started to the delivery slots;
// the mu is held and the worker not closing.
func (w *worker) submitLocked(start []*pull.Msg) {
	for _, e := range start {
		w.busy.Add(1)
		w.s.slots.Submit(w, w.space, e)
	}
}

// settledInOrder tells the Order that msg, started, is settled or handed
// back, and submits the events that start now: the next of its key, or
// of others that waited for room. A worker that closes hands them back.
func (w *worker) settledInOrder(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	start := w.order.Done(partitionKey(msg), meta.Sequence.Stream)
	if len(start) == 0 {
		return
	}
	w.mu.Lock()
	closing := w.closing
	if !closing {
		w.submitLocked(start)
	}
	w.mu.Unlock()
	if closing {
		w.handBackAll(start)
	}
}

// handBackAll hands events back to JetStream at once, in the order given
// (the Order's: by sequence).
func (w *worker) handBackAll(events []*pull.Msg) {
	for _, e := range events {
		w.handBack(e, 0)
	}
}

// Disconnected closes the Order when the puller's connection is lost:
// the events the worker holds go to another replica after their ack
// wait, so it starts none of them, and retries none (retryLater), until
// it opens again, once connected (openWhenAllHeld). The ones in delivery
// end.
func (w *worker) Disconnected() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.order.Close()
	w.session = pull.Session{}
	if !w.closing {
		w.openLocked() // if no message comes again, what waits behind its key must start
	}
}

var _ pull.Disconnected = (*worker)(nil)

// openLocked starts the wait that opens the Order, unless one runs; the
// mu is held and the worker not closing.
func (w *worker) openLocked() {
	if w.opening {
		return
	}
	w.opening = true
	w.busy.Add(1)
	go func() {
		defer w.busy.Done()
		w.open()
	}()
}

// Bounds of the wait between two questions to the consumer while the
// Order is closed.
const (
	minOpenWait = 2 * time.Millisecond
	maxOpenWait = time.Second
)

// openWhenAllHeld asks the consumer for its ack pending until the Order
// opens (keyorder.Order.Open), or ctx ends, and submits what starts.
func (w *worker) openWhenAllHeld(ctx context.Context) {
	wait := minOpenWait
	for {
		s := w.order.Snapshot()
		pending, err := w.ackPending(ctx)
		// Not while an event is in delivery (read after the answer): one
		// acknowledged before the consumer answered, and not yet done in
		// the Order, would count in the Order's held and not in the
		// consumer's pending, and hide an event held elsewhere. One that
		// left delivery since was done, which changed the Order.
		if err == nil && w.inFlight.Load() == 0 {
			if ok, start := w.order.Open(s, pending); ok {
				w.mu.Lock()
				closing := w.closing
				if !closing {
					w.submitLocked(start)
				}
				// Closed again meanwhile (a new session): go on asking.
				done := closing || w.order.IsOpen()
				if done {
					w.opening = false
				}
				w.mu.Unlock()
				if closing {
					w.handBackAll(start)
				}
				if done {
					return
				}
				wait = minOpenWait
				continue
			}
		} else if ctx.Err() == nil {
			w.log.Debug("asking the consumer for its events in flight failed; the ordered events wait", "error", err)
		}
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.opening = false
			w.mu.Unlock()
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, maxOpenWait)
	}
}

// ackPending asks JetStream how many events the worker's consumer has
// handed out and not had settled.
func (w *worker) ackPending(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := w.s.js.Consumer(ctx, w.target.stream, w.target.consumer)
	if err != nil {
		return 0, err
	}
	return cons.CachedInfo().NumAckPending, nil
}
