package auth

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// ErrTooManyReviews is returned, and answered 429, when callers send more
// bearer tokens not seen before than KubernetesConfig.NewTokensPerSecond:
// each needs a TokenReview of the API server, which made-up tokens would
// otherwise flood.
var ErrTooManyReviews = errors.New("too many new bearer tokens to review; retry later")

// reviews limits the TokenReviews of tokens not seen before: a token that
// passed a review within ttl goes through at once (the delegate keeps the
// review's answer), any other waits for the limiter. Requests without a
// bearer token (client certificates) are not limited.
type reviews struct {
	next    authenticator.Request
	limiter *rate.Limiter
	ttl     time.Duration
	max     int

	mu    sync.Mutex
	known map[[sha256.Size]byte]time.Time // accepted token's hash -> when to forget it
}

func newReviews(next authenticator.Request, perSecond float64, burst int, ttl time.Duration, max int) *reviews {
	return &reviews{next: next, limiter: rate.NewLimiter(rate.Limit(perSecond), burst), ttl: ttl, max: max,
		known: map[[sha256.Size]byte]time.Time{}}
}

// AuthenticateRequest implements authenticator.Request.
func (v *reviews) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	token, ok := bearer(r)
	if !ok {
		return v.next.AuthenticateRequest(r)
	}
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	if !v.seen(sum, now) && !v.limiter.Allow() {
		return nil, false, ErrTooManyReviews
	}
	resp, ok, err := v.next.AuthenticateRequest(r)
	if ok && err == nil {
		v.remember(sum, now)
	}
	return resp, ok, err
}

func (v *reviews) seen(sum [sha256.Size]byte, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	until, ok := v.known[sum]
	return ok && now.Before(until)
}

// remember keeps an accepted token for ttl; when max are kept, the expired
// ones are dropped first, then any one.
func (v *reviews) remember(sum [sha256.Size]byte, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.known) >= v.max {
		for k, until := range v.known {
			if !now.Before(until) {
				delete(v.known, k)
			}
		}
		for k := range v.known {
			if len(v.known) < v.max {
				break
			}
			delete(v.known, k)
		}
	}
	v.known[sum] = now.Add(v.ttl)
}
