package schedule

import (
	"time"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// maxRetryTurnWait is the longest a retry waits for its namespace's turn:
// a namespace holds at most its Subscriptions' events in flight (100 of
// 1,000 each, 4,000 ordered), which at the default rate is a wait of 800 s
// at most; a retry past this one is made after it without a turn.
const maxRetryTurnWait = time.Hour

// retryTurns bounds each namespace's retries a second: a token bucket per
// namespace, one token taken when a retry is scheduled. A nil *retryTurns
// bounds nothing. It is safe for concurrent use.
type retryTurns struct {
	perNamespace *ratelimit.PerKey
}

// newRetryTurns returns turns of perSecond retries a second for each
// namespace, in bursts of burst; nil when perSecond is 0 or less.
func newRetryTurns(perSecond float64, burst int) *retryTurns {
	if perSecond <= 0 {
		return nil
	}
	return &retryTurns{perNamespace: ratelimit.NewPerKey(perSecond, max(burst, 1))}
}

// after takes namespace's next retry turn and returns how long from now the
// retry waits: its backoff, or longer when the namespace's turn comes
// later.
func (r *retryTurns) after(namespace string, backoff time.Duration) time.Duration {
	if r == nil {
		return backoff
	}
	wait, _, ok := r.perNamespace.ReserveN(namespace, time.Now(), 1, maxRetryTurnWait)
	if !ok {
		return maxRetryTurnWait
	}
	return max(backoff, wait)
}
