package delivery

import (
	"context"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/reply"
)

// PublishReply stores a sink's CloudEvent reply as a new event, one hop
// further, sent by the Subscription's namespace (package reply). An
// invalid reply or one over the hop limit is dropped (logged and counted)
// and is no error: the delivery itself succeeded. The error is a failure
// to store a valid reply, or its namespace over its rate of events: the
// attempt failed (ReplyFailure).
func (d *Deliverer) PublishReply(ctx context.Context, log EventLog, h nats.Header, header http.Header, body []byte) error {
	r, err := reply.Decode(ctx, header, body, h)
	if err != nil {
		d.rec.Count.Replies[string(reply.Invalid)].Inc()
		log.Warn("sink replied with an invalid CloudEvent, dropped", "error", err)
		return nil
	}
	ctx, tp, ts, end := d.rec.ReplyContext(ctx, h, r.Event.ID(), r.Event.Type(), r.Hops)
	res, err := d.s.cfg.Replies.Publish(ctx, r, d.namespace, tp, ts)
	switch res {
	case reply.Failed:
		end(string(res), err)
		return err
	case reply.RateLimited:
		d.rec.Count.Replies[string(res)].Inc()
		end(string(res), err)
		return err
	}
	d.rec.Count.Replies[string(res)].Inc()
	end(string(res), nil)
	switch res {
	case reply.HopLimit:
		log.Warn("reply over the hop limit, dropped", "replyID", r.Event.ID(), "hops", r.Hops, "maxHops", d.s.cfg.Replies.MaxHops())
	case reply.Invalid:
		log.Warn("sink replied with an event that cannot be stored, dropped", "error", err)
	}
	return nil
}

// ReplyFailure is the result of an attempt whose sink answered but whose
// reply PublishReply could not store (its error): retried, not before
// reply.RateLimitedRetryAfter when the reply's namespace was over its rate.
func ReplyFailure(err error) Result {
	r := Result{Verdict: Retry, Err: err}
	if errors.Is(err, admission.ErrTooManyEvents) {
		r.RetryAfter = reply.RateLimitedRetryAfter
	}
	return r
}
