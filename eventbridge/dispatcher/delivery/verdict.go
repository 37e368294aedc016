package delivery

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Verdict is what to do with an event after one delivery attempt.
type Verdict int

// The verdicts.
const (
	// Done: the sink took the event (2xx); acknowledge it.
	Done Verdict = iota
	// Retry: a transient failure (408, 429, 5xx, network error); deliver
	// again after a backoff, unless the attempts are used up.
	Retry
	// GiveUp: the sink refused the event for good (any other status);
	// dead-letter it now.
	GiveUp
)

// Judge returns the verdict for an HTTP status; status 0 stands for a
// network error or timeout.
func Judge(status int) Verdict {
	switch {
	case status >= 200 && status < 300:
		return Done
	case status == 0, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return Retry
	default:
		return GiveUp
	}
}

// MaxRetryAfter caps the delay a sink can ask for with Retry-After.
const MaxRetryAfter = 10 * time.Minute

// RetryAfter parses a Retry-After header (seconds or an HTTP date) relative
// to now, capped at MaxRetryAfter; 0 when absent or invalid.
func RetryAfter(value string, now time.Time) time.Duration {
	if value == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(value); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(value); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// RedeliveryDelay is the delay before the next attempt after the given
// number of failed attempts: the Subscription's exponential backoff with
// up to ±jitter of it at random (jitter in [0,1]), and at least retryAfter.
func RedeliveryDelay(d v1alpha2.Delivery, failures int, jitter float64, retryAfter time.Duration) time.Duration {
	base := d.Backoff(failures)
	if jitter > 0 {
		base += time.Duration((rand.Float64()*2 - 1) * jitter * float64(base))
	}
	return max(base, retryAfter, time.Millisecond)
}
