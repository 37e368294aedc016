package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// GiveUp dead-letters the event (or drops it when dead-lettering is off)
// and terminates it. A dead letter that cannot be stored for want of room
// (the older letters of its namespace, and of those holding more, already
// made what room they could) or
// size is dropped with its event, counted and logged; one that failed
// otherwise (NATS unavailable) leaves the event to be redelivered and
// given up again.
func (d *Deliverer) GiveUp(ctx context.Context, log EventLog, msg jetstream.Msg, meta *jetstream.MsgMetadata, status int, reason string) {
	span := d.rec.DeadLetterSpan(ctx, msg, meta, status, reason)
	if span != nil {
		defer span.End()
	}
	if !d.delivery.DeadLetter {
		d.rec.Count.Discarded.Inc()
		d.rec.ObserveGiveUp(msg, meta, observe.Discarded, status, reason)
		if span != nil {
			span.SetAttributes(tracing.Outcome.String(tracing.OutcomeDiscarded))
		}
		log.Warn("event given up and discarded (deadLetter is off)", "status", status, "error", reason)
		Settle(log, d.term(ctx, msg, reason))
		return
	}
	f := deadletter.Failure{
		Namespace: d.namespace, Subscription: d.name,
		Status: status, Error: reason, Attempts: int(meta.NumDelivered),
		Subject: msg.Subject(), Sequence: meta.Sequence.Stream, Stream: meta.Stream, At: time.Now(),
	}
	dropped, err := d.s.cfg.DeadLetters.Write(ctx, msg.Headers(), msg.Data(), f)
	if err != nil {
		if span != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "storing the dead letter failed")
		}
		if errors.Is(err, eventstore.ErrStorageFull) || errors.Is(err, eventstore.ErrTooLarge) {
			// It never will be stored: kept in the event stream, it would
			// be given up again and again, and fill the stream for every
			// namespace.
			d.rec.Count.DeadLetterFull.Inc()
			d.rec.ObserveGiveUp(msg, meta, observe.Discarded, status, reason)
			if span != nil {
				span.SetAttributes(tracing.Outcome.String(tracing.OutcomeDiscarded))
			}
			log.Error("event given up and dropped: its dead letter cannot be stored", "status", status, "reason", reason, "error", err)
			Settle(log, d.term(ctx, msg, "dropped, the dead letter could not be stored: "+reason))
			return
		}
		log.Error("storing dead letter failed, will retry", "error", err)
		Settle(log, msg.NakWithDelay(d.Delay(int(meta.NumDelivered), 0)))
		return
	}
	d.rec.Count.DeadLettered.Inc()
	d.rec.ObserveGiveUp(msg, meta, observe.DeadLettered, status, reason)
	if span != nil {
		span.SetAttributes(tracing.Outcome.String(tracing.OutcomeDeadLetter))
	}
	switch {
	case dropped.Others > 0:
		log.Warn("event dead-lettered; the dead-letter stream is full: older dead letters of the namespaces holding the most dropped to make room for it", "status", status, "error", reason, "droppedLetters", dropped.Own, "droppedOthers", dropped.Others)
	case dropped.Own > 0:
		log.Info("event dead-lettered; older dead letters of the namespace dropped to make room for it", "status", status, "error", reason, "droppedLetters", dropped.Own)
	default:
		log.Info("event dead-lettered", "status", status, "error", reason)
	}
	Settle(log, d.term(ctx, msg, "dead-lettered: "+reason))
}

// term terminates msg with reason and waits until JetStream confirms it
// (pull.Terminate): the budget reads the consumer's backlog right after
// giving events up, and a term still on its way would count there as
// unacknowledged and make it give up one event too many.
func (d *Deliverer) term(ctx context.Context, msg jetstream.Msg, reason string) error {
	return pull.Terminate(ctx, d.s.cfg.JetStream.Conn(), msg, reason)
}
