package publisher

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
	perSender rate.Limit // 0: no bound
	burst     int
	anonymous *rate.Limiter // nil: no bound

	mu      sync.Mutex
	senders map[string]*rate.Limiter
}

func newSenderRates(cfg Config) *senderRates {
	s := &senderRates{perSender: rate.Limit(cfg.SenderRate), burst: cfg.SenderBurst, senders: map[string]*rate.Limiter{}}
	if cfg.AnonymousRate > 0 {
		s.anonymous = rate.NewLimiter(rate.Limit(cfg.AnonymousRate), cfg.AnonymousBurst)
	}
	return s
}

// take takes n events from sender's bucket ("" the sender-less one), or
// none and an error wrapping ErrTooManyEvents when it has fewer.
func (s *senderRates) take(sender string, n int) error {
	l := s.limiter(sender)
	if l == nil || l.AllowN(time.Now(), n) {
		return nil
	}
	who := "namespace " + sender
	if sender == "" {
		who = "publishers without a namespace (together)"
	}
	return fmt.Errorf("%w: %s may store %g events a second (bursts of %d); try again later", ErrTooManyEvents, who, float64(l.Limit()), l.Burst())
}

func (s *senderRates) limiter(sender string) *rate.Limiter {
	if sender == "" {
		return s.anonymous
	}
	if s.perSender == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.senders[sender]
	if !ok {
		l = rate.NewLimiter(s.perSender, s.burst)
		s.senders[sender] = l
	}
	return l
}
