package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxKept is how many keys' buckets are kept before the full ones are
// forgotten: a full bucket is what a key not seen before gets, so
// forgetting it changes no answer.
const maxKept = 4096

// PerKey is a token bucket per key, each refilled at the same rate up to
// the same burst. It is safe for concurrent use.
type PerKey struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewPerKey returns buckets of burst tokens, each refilled at perSecond
// tokens a second.
func NewPerKey(perSecond float64, burst int) *PerKey {
	return &PerKey{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*rate.Limiter{}}
}

// Allow takes a token of key's bucket now, or none and reports false when
// it is empty.
func (p *PerKey) Allow(key string) bool { return p.AllowN(key, time.Now(), 1) }

// AllowN takes n tokens of key's bucket at now, or none and reports false
// when it has fewer.
func (p *PerKey) AllowN(key string, now time.Time, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bucket(key, now).AllowN(now, n)
}

// ReserveN takes n tokens of key's bucket at now, ahead of their refill
// when it has fewer (the bucket owes them: the next takes wait for them
// too), and returns how long from now the caller waits for them, with a
// cancel that gives them back (also those taken at once, as of now, which
// rate.Reservation's Cancel would keep once now has passed); ok is false,
// and nothing is taken, when n is more than a burst or the wait would be
// longer than maxWait.
func (p *PerKey) ReserveN(key string, now time.Time, n int, maxWait time.Duration) (wait time.Duration, cancel func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.bucket(key, now).ReserveN(now, n)
	if !r.OK() {
		return 0, nil, false
	}
	if wait = r.DelayFrom(now); wait > maxWait {
		r.CancelAt(now)
		return 0, nil, false
	}
	cancel = func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		at := time.Now()
		if r.DelayFrom(at) <= 0 {
			at = now // its time has come: give them back as of when they were taken
		}
		r.CancelAt(at)
	}
	return wait, cancel, true
}

// bucket returns key's bucket, made full when new. p.mu is held.
func (p *PerKey) bucket(key string, now time.Time) *rate.Limiter {
	l := p.buckets[key]
	if l == nil {
		if len(p.buckets) >= maxKept {
			p.forgetFull(now)
		}
		l = rate.NewLimiter(p.limit, p.burst)
		p.buckets[key] = l
	}
	return l
}

// Rate is the tokens a second each bucket is refilled with.
func (p *PerKey) Rate() float64 { return float64(p.limit) }

// Burst is the tokens each bucket holds when full.
func (p *PerKey) Burst() int { return p.burst }

// forgetFull drops the buckets that are full at now. p.mu is held.
func (p *PerKey) forgetFull(now time.Time) {
	for k, l := range p.buckets {
		if l.TokensAt(now) >= float64(p.burst) {
			delete(p.buckets, k)
		}
	}
}

// Debit takes n tokens of key's bucket at now whatever it holds, down to
// a debt of one burst at most (the rest is forgiven): the tokens another
// holder of the same bound took (see admission.Rates.Debit), which the
// next takes of this bucket wait for.
func (p *PerKey) Debit(key string, now time.Time, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	DebitLimiter(p.bucket(key, now), now, n)
}

// DebitLimiter takes n tokens of l at now whatever it holds, down to a
// debt of one burst at most, as PerKey.Debit does for one key.
func DebitLimiter(l *rate.Limiter, now time.Time, n int) {
	burst := l.Burst()
	if n <= 0 || burst <= 0 {
		return
	}
	// Tokens go down to -burst at most; a reservation takes at most a
	// burst at a time, and owes what the bucket does not hold.
	left := min(float64(n), l.TokensAt(now)+float64(burst))
	for left >= 1 {
		take := int(min(left, float64(burst)))
		l.ReserveN(now, take)
		left -= float64(take)
	}
}
