package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// ErrTooManyEvents is wrapped by the refusal of events that would take
// their sender past its rate (Rates): 429 at the publisher, a delivery
// retried later for a sink's reply.
var ErrTooManyEvents = errors.New("too many events")

// Rates bounds the events each sender stores per second, whatever carried
// them (publishes, the events Functions emit, sinks' replies): a token
// bucket per sender namespace, and one that every publish without a
// namespace shares. Namespaces come from TokenReview or from the
// Subscription whose sink replied, so the buckets are at most one per
// namespace of the cluster. A nil *Rates bounds nothing. It is safe for
// concurrent use.
type Rates struct {
	perSender *ratelimit.PerKey // nil: no bound
	anonymous *rate.Limiter     // nil: no bound
}

// NewRates returns buckets of perSender events a second (bursts of
// senderBurst) for each sender namespace, and one of anonymous events a
// second (bursts of anonymousBurst) for all events without one; a rate of
// 0 bounds nothing.
func NewRates(perSender float64, senderBurst int, anonymous float64, anonymousBurst int) *Rates {
	r := &Rates{}
	if perSender > 0 {
		r.perSender = ratelimit.NewPerKey(perSender, senderBurst)
	}
	if anonymous > 0 {
		r.anonymous = rate.NewLimiter(rate.Limit(anonymous), anonymousBurst)
	}
	return r
}

// Take takes n events from sender's bucket ("" the sender-less one), or
// none and an error wrapping ErrTooManyEvents when it has fewer.
func (r *Rates) Take(sender string, n int) error {
	if r == nil {
		return nil
	}
	now := time.Now()
	if sender == "" {
		if r.anonymous == nil || r.anonymous.AllowN(now, n) {
			return nil
		}
		return tooManyEvents("publishers without a namespace (together)", float64(r.anonymous.Limit()), r.anonymous.Burst())
	}
	if r.perSender == nil || r.perSender.AllowN(sender, now, n) {
		return nil
	}
	return tooManyEvents("namespace "+sender, r.perSender.Rate(), r.perSender.Burst())
}

// Wait takes one event from sender's bucket, waiting for it when the
// bucket is empty, at most maxWait: a sink's reply waits for its
// namespace's rate instead of failing its delivery. It returns an error
// wrapping ErrTooManyEvents, having taken nothing, when the wait would be
// longer than maxWait, and ctx's error when ctx ends first. Without a
// sender it is Take.
func (r *Rates) Wait(ctx context.Context, sender string, maxWait time.Duration) error {
	if r == nil || r.perSender == nil || sender == "" {
		return r.Take(sender, 1)
	}
	wait, cancel, ok := r.perSender.ReserveN(sender, time.Now(), 1, maxWait)
	if !ok {
		return fmt.Errorf("%w: namespace %s stores %g events a second (bursts of %d), and its next one is more than %s away",
			ErrTooManyEvents, sender, r.perSender.Rate(), r.perSender.Burst(), maxWait)
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		cancel()
		return fmt.Errorf("wait for namespace %s's rate of events: %w", sender, ctx.Err())
	}
}

func tooManyEvents(who string, perSecond float64, burst int) error {
	return fmt.Errorf("%w: %s may store %g events a second (bursts of %d); try again later", ErrTooManyEvents, who, perSecond, burst)
}
