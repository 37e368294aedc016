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
// namespace of the cluster. LimitBytes bounds their bytes alike. A nil
// *Rates bounds nothing. It is safe for concurrent use, once LimitBytes
// was called, if it is.
type Rates struct {
	perSender *ratelimit.PerKey // nil: no bound
	anonymous *rate.Limiter     // nil: no bound
	// bytesPerSender and anonymousBytes bound bytes as the others bound
	// events (LimitBytes); nil: no bound.
	bytesPerSender *ratelimit.PerKey
	anonymousBytes *rate.Limiter
	// spent records what was taken, for TakeSpent; nil until RecordSpent.
	spent *spentLog
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

// LimitBytes bounds the bytes each sender namespace stores to perSender a
// second (bursts of senderBurst), and those of all events without a
// namespace to anonymous a second (bursts of anonymousBurst): a 1 MiB
// event costs the store, the dispatcher and the connections they share a
// thousand times what a 1 KiB one does, which a rate of events does not
// see. A rate of 0 bounds nothing. A burst must hold the largest request
// (TakeBytes takes it whole). Call it before the Rates are used.
func (r *Rates) LimitBytes(perSender float64, senderBurst int, anonymous float64, anonymousBurst int) {
	if perSender > 0 {
		r.bytesPerSender = ratelimit.NewPerKey(perSender, senderBurst)
	}
	if anonymous > 0 {
		r.anonymousBytes = rate.NewLimiter(rate.Limit(anonymous), anonymousBurst)
	}
}

// TakeBytes takes n bytes from sender's bytes bucket ("" the sender-less
// one), or none and an error wrapping ErrTooManyEvents when it has fewer.
func (r *Rates) TakeBytes(sender string, n int64) error {
	if r == nil || n <= 0 {
		return nil
	}
	now := time.Now()
	if sender == "" {
		if r.anonymousBytes == nil {
			return nil
		}
		if r.anonymousBytes.AllowN(now, clampInt(n)) {
			r.spent.add(sender, 0, n)
			return nil
		}
		return tooManyBytes("publishers without a namespace (together)", float64(r.anonymousBytes.Limit()), r.anonymousBytes.Burst())
	}
	if r.bytesPerSender == nil {
		return nil
	}
	if r.bytesPerSender.AllowN(sender, now, clampInt(n)) {
		r.spent.add(sender, 0, n)
		return nil
	}
	return tooManyBytes("namespace "+sender, r.bytesPerSender.Rate(), r.bytesPerSender.Burst())
}

// clampInt is n as an int a bucket can be asked for.
func clampInt(n int64) int { return int(min(n, 1<<31-1)) }

// Take takes n events from sender's bucket ("" the sender-less one), or
// none and an error wrapping ErrTooManyEvents when it has fewer.
func (r *Rates) Take(sender string, n int) error {
	if r == nil {
		return nil
	}
	now := time.Now()
	if sender == "" {
		if r.anonymous == nil {
			return nil
		}
		if r.anonymous.AllowN(now, n) {
			r.spent.add(sender, int64(n), 0)
			return nil
		}
		return tooManyEvents("publishers without a namespace (together)", float64(r.anonymous.Limit()), r.anonymous.Burst())
	}
	if r.perSender == nil {
		return nil
	}
	if r.perSender.AllowN(sender, now, n) {
		r.spent.add(sender, int64(n), 0)
		return nil
	}
	return tooManyEvents("namespace "+sender, r.perSender.Rate(), r.perSender.Burst())
}

// Wait takes one event of size bytes from sender's buckets, waiting for
// them when a bucket is empty, at most maxWait: a sink's reply waits for
// its namespace's rate instead of failing its delivery. It returns an
// error wrapping ErrTooManyEvents, having taken nothing, when the wait
// would be longer than maxWait, and ctx's error when ctx ends first.
// Without a sender it is Take and TakeBytes.
func (r *Rates) Wait(ctx context.Context, sender string, size int64, maxWait time.Duration) error {
	if r == nil {
		return nil
	}
	if sender == "" {
		if err := r.Take(sender, 1); err != nil {
			return err
		}
		return r.TakeBytes(sender, size)
	}
	now := time.Now()
	var wait time.Duration
	var cancels []func()
	cancel := func() {
		for _, c := range cancels {
			c()
		}
	}
	if r.perSender != nil {
		w, c, ok := r.perSender.ReserveN(sender, now, 1, maxWait)
		if !ok {
			return fmt.Errorf("%w: namespace %s stores %g events a second (bursts of %d), and its next one is more than %s away",
				ErrTooManyEvents, sender, r.perSender.Rate(), r.perSender.Burst(), maxWait)
		}
		wait, cancels = max(wait, w), append(cancels, c)
	}
	if r.bytesPerSender != nil && size > 0 {
		w, c, ok := r.bytesPerSender.ReserveN(sender, now, clampInt(size), maxWait)
		if !ok {
			cancel()
			return fmt.Errorf("%w: namespace %s stores %g bytes a second (bursts of %d), and its next %d are more than %s away",
				ErrTooManyEvents, sender, r.bytesPerSender.Rate(), r.bytesPerSender.Burst(), size, maxWait)
		}
		wait, cancels = max(wait, w), append(cancels, c)
	}
	taken := func() error {
		var events, bytes int64
		if r.perSender != nil {
			events = 1
		}
		if r.bytesPerSender != nil {
			bytes = max(size, 0)
		}
		r.spent.add(sender, events, bytes)
		return nil
	}
	if wait <= 0 {
		return taken()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return taken()
	case <-ctx.Done():
		cancel()
		return fmt.Errorf("wait for namespace %s's rate of events: %w", sender, ctx.Err())
	}
}

func tooManyBytes(who string, perSecond float64, burst int) error {
	return fmt.Errorf("%w: %s may store %g bytes a second (bursts of %d); try again later", ErrTooManyEvents, who, perSecond, burst)
}

func tooManyEvents(who string, perSecond float64, burst int) error {
	return fmt.Errorf("%w: %s may store %g events a second (bursts of %d); try again later", ErrTooManyEvents, who, perSecond, burst)
}
