package schedule

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/delivery"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/slots"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// handleIn delivers one event and settles it, in turn t (nil: outside the
// delivery slots), whose slot it gives back while it waits for the sink.
func (w *worker) handleIn(ctx context.Context, msg jetstream.Msg, t *slots.Turn) {
	w.inFlight.Add(1)
	defer w.inFlight.Add(-1)
	// Whatever becomes of the event, it leaves the worker's hands here,
	// unless it is kept for its next attempt (retryLater).
	kept := false
	defer func() {
		if !kept {
			w.heartbeat.Release(msg)
			if e, ok := msg.(*pull.Msg); ok {
				e.Release()
			}
			if w.order != nil {
				w.settledInOrder(msg)
			}
		}
	}()
	meta, log, ok := w.admit(ctx, msg)
	if !ok {
		return
	}
	// Keep the event ours while we wait for the sink and while it works,
	// and while it waits for its next attempt (retryLater).
	w.heartbeat.Hold(msg, w.beatEvery())
	if !w.awaitSeat(ctx, t) {
		return
	}
	defer w.gate.leave()
	if !w.awaitSink(ctx, log, msg, meta, t) {
		return
	}
	kept = w.attempt(ctx, log, msg, meta, t)
}

// awaitSeat waits, its slot given back, for a seat of the Subscription's
// gate (maxInFlightMessages across its partitions), and reports whether
// it got one: not when the worker stops (JetStream redelivers the event
// after the ack wait).
func (w *worker) awaitSeat(ctx context.Context, t *slots.Turn) bool {
	if w.gate.tryEnter() {
		return true
	}
	t.Pause() // a turn waiting for a seat holds no slot
	defer t.Resume()
	return w.gate.enter(ctx)
}

// admit reads the event's metadata and settles at once an event not to
// attempt: one without metadata (terminated), one whose type the
// Subscription does not take (acknowledged), one whose attempts are used
// up (given up). It reports whether the event is to be attempted.
func (w *worker) admit(ctx context.Context, msg jetstream.Msg) (*jetstream.MsgMetadata, delivery.EventLog, bool) {
	meta, err := msg.Metadata()
	if err != nil {
		w.log.Error("event without metadata, terminating it", "error", err)
		_ = msg.Term()
		return nil, delivery.EventLog{}, false
	}
	h := msg.Headers()
	log := w.dl.EventLog(h, meta)
	replay := strings.HasPrefix(msg.Subject(), stream.ReplaySubjectPrefix+".")
	if !replay && !w.target.sub.Matches(eventstore.RouteSource(h), eventstore.Attribute(h, "type")) {
		// Cleaning mapped another type onto one of our subjects.
		delivery.Settle(log, msg.Ack())
		return nil, log, false
	}
	if int(meta.NumDelivered) > w.target.delivery.MaxDeliver {
		w.giveUp(ctx, log, msg, meta, 0, "delivery attempts used up before the last attempt was settled")
		return nil, log, false
	}
	return meta, log, true
}

// awaitSink waits, its slot given back, until the sink is ready, and
// reports whether it is: not when the worker stops (JetStream redelivers
// the event after the ack wait) nor when the Subscription went over its
// budget meanwhile (the event is given up).
func (w *worker) awaitSink(ctx context.Context, log delivery.EventLog, msg jetstream.Msg, meta *jetstream.MsgMetadata, t *slots.Turn) bool {
	readiness := ready
	if ok, _ := w.sinkReady(); !ok {
		t.Pause() // a turn waiting for its sink holds no slot
		readiness = w.waitReady(ctx)
		t.Resume()
	}
	switch readiness {
	case stopping:
		return false
	case overBudget: // waitReady took the excess
		w.dl.GiveUp(ctx, log, msg, meta, 0, w.backlog.Reason(w.notReadyReason()))
		w.backlog.GaveUp()
		return false
	}
	return true
}

// attempt makes one delivery attempt, stores the sink's reply, and
// settles the event by the verdict; it reports whether the event is kept
// for its next attempt.
func (w *worker) attempt(ctx context.Context, log delivery.EventLog, msg jetstream.Msg, meta *jetstream.MsgMetadata, t *slots.Turn) bool {
	ctx, at := w.rec.StartAttempt(ctx, msg, meta, int(meta.NumDelivered))
	defer at.End(observe.GiveUpOutcome(w.target.delivery.DeadLetter)) // unless delivered or retried
	res := w.post(ctx, log, msg, &at, t)
	if res.Verdict == delivery.Done && res.Reply != nil {
		// Storing the reply may wait for the namespace's rate of events
		// (reply.MaxRateWait): no slot is held meanwhile, as none is while
		// the sink works.
		t.Pause()
		err := w.dl.PublishReply(ctx, log, msg.Headers(), res.Reply, res.ReplyBody)
		t.Resume()
		res.ReplyHeld.Release()
		if err != nil {
			at.Failed(err)
			res = delivery.ReplyFailure(err)
		}
	}
	w.rec.ObserveAttempt(msg, meta, res.Answer(), at.Start())
	return w.settle(ctx, log, msg, meta, res, &at)
}

// post makes one delivery attempt, recorded by at, in turn t, whose slot
// it takes again if it was taken back while the sink worked.
func (w *worker) post(ctx context.Context, log delivery.EventLog, msg jetstream.Msg, at *observe.Attempt, t *slots.Turn) delivery.Result {
	url, res := w.dl.Resolve()
	if res.Err != nil {
		at.Answered(res.Answer())
		return res
	}
	res = w.dl.Send(ctx, log, msg, url)
	t.Renew()
	at.Answered(res.Answer())
	return res
}

// settle acknowledges a delivered event, keeps a failed one for its next
// attempt (or hands it back with its delay), or gives it up: after its
// last attempt, when the budget's excess takes it, or on a verdict of
// GiveUp. It reports whether the event is kept.
func (w *worker) settle(ctx context.Context, log delivery.EventLog, msg jetstream.Msg, meta *jetstream.MsgMetadata, res delivery.Result, at *observe.Attempt) bool {
	attempts := int(meta.NumDelivered)
	switch res.Verdict {
	case delivery.Done:
		w.rec.Count.Delivered.Inc()
		at.Delivered(meta.Timestamp)
		delivery.Settle(log, msg.Ack())
	case delivery.Retry:
		w.rec.Count.Failed.Inc()
		w.backlog.Failed()
		if attempts >= w.target.delivery.MaxDeliver {
			w.giveUp(ctx, log, msg, meta, res.Status, res.Reason())
			return false
		}
		if w.backlog.TakeExcess() {
			w.dl.GiveUp(ctx, log, msg, meta, res.Status, w.backlog.Reason("the attempt failed: "+res.Reason()))
			w.backlog.GaveUp()
			return false
		}
		backoff := w.dl.Delay(attempts, res.RetryAfter)
		delay := w.s.retryTurns.after(w.target.sub.Namespace, backoff)
		log.Debug("delivery failed, will retry", "status", res.Status, "error", res.Reason(), "retryIn", delay, "backoff", backoff)
		at.Retry(delay)
		if w.retryLater(msg, delay) {
			return true
		}
		if w.order != nil {
			// The worker stops (its retries are closed): whoever holds
			// the ordered consumer's events next starts none before this
			// one is back, so it comes back at once, as the retries the
			// worker kept do (close), not after its backoff.
			delay = 0
		}
		delivery.Settle(log, msg.NakWithDelay(delay))
	case delivery.GiveUp:
		w.rec.Count.Failed.Inc()
		w.giveUp(ctx, log, msg, meta, res.Status, res.Reason())
	}
	return false
}

// giveUp gives msg up for another reason than the budget's excess,
// counted as settling (budget.Backlog.GivingUp) until its term is
// confirmed.
func (w *worker) giveUp(ctx context.Context, log delivery.EventLog, msg jetstream.Msg, meta *jetstream.MsgMetadata, status int, reason string) {
	w.backlog.GivingUp()
	defer w.backlog.GaveUp()
	w.dl.GiveUp(ctx, log, msg, meta, status, reason)
}

// retryLater keeps msg, which the puller delivered, for its next attempt
// after delay (delivery.Retries), and reports whether it does: an event fetched
// otherwise, or one that fails while the worker stops, is handed back to
// JetStream with its delay instead.
func (w *worker) retryLater(msg jetstream.Msg, delay time.Duration) bool {
	e, ok := msg.(*pull.Msg)
	if !ok {
		return false
	}
	return w.retries.Add(e, delay, func(e *pull.Msg) {
		e.Redelivered() // the attempt's number, as JetStream's count would be
		if !w.startBusy() {
			w.handBack(e, 0)
			return
		}
		if w.order != nil && !w.order.IsOpen() {
			// A new session, or a lost connection: the event may be handed
			// out again before this attempt would end. It goes back, to
			// come again in its place (order.go).
			defer w.busy.Done()
			w.handBack(e, 0)
			w.settledInOrder(e)
			return
		}
		w.s.slots.Submit(w, w.space, e)
	})
}

// handBack returns an event the worker held for its next attempt to
// JetStream, which delivers it again after delay.
func (w *worker) handBack(e *pull.Msg, delay time.Duration) {
	defer e.Release()
	defer w.heartbeat.Release(e)
	if err := e.NakWithDelay(delay); err != nil {
		w.log.Warn("handing an event back failed; it comes back after the ack wait", "error", err)
	}
}
