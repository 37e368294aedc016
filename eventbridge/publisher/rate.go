package publisher

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// ErrTooManyEvents is wrapped by the refusal (429) of a request whose
// events would take its sender past its rate (Config.SenderRate,
// AnonymousRate).
var ErrTooManyEvents = errors.New("too many events")

// senderRates bounds the events each sender stores per second: a token
// bucket per sender namespace, and one that every publish without a
// namespace shares. Namespaces come from TokenReview (Senders), so the
// buckets are at most one per namespace of the cluster. It is safe for
// concurrent use.
type senderRates struct {
	perSender *ratelimit.PerKey // nil: no bound
	anonymous *rate.Limiter     // nil: no bound
}

func newSenderRates(cfg Config) *senderRates {
	s := &senderRates{}
	if cfg.SenderRate > 0 {
		s.perSender = ratelimit.NewPerKey(cfg.SenderRate, cfg.SenderBurst)
	}
	if cfg.AnonymousRate > 0 {
		s.anonymous = rate.NewLimiter(rate.Limit(cfg.AnonymousRate), cfg.AnonymousBurst)
	}
	return s
}

// take takes n events from sender's bucket ("" the sender-less one), or
// none and an error wrapping ErrTooManyEvents when it has fewer.
func (s *senderRates) take(sender string, n int) error {
	now := time.Now()
	if sender == "" {
		if s.anonymous == nil || s.anonymous.AllowN(now, n) {
			return nil
		}
		return tooManyEvents("publishers without a namespace (together)", float64(s.anonymous.Limit()), s.anonymous.Burst())
	}
	if s.perSender == nil || s.perSender.AllowN(sender, now, n) {
		return nil
	}
	return tooManyEvents("namespace "+sender, s.perSender.Rate(), s.perSender.Burst())
}

func tooManyEvents(who string, perSecond float64, burst int) error {
	return fmt.Errorf("%w: %s may store %g events a second (bursts of %d); try again later", ErrTooManyEvents, who, perSecond, burst)
}
