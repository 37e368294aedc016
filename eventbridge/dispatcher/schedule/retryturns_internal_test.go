package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRetryTurns: within its burst a namespace's retries wait their
// backoff; past it each waits a turn more of the rate, longer than a
// short backoff; another namespace's bucket is its own; no rate bounds
// nothing.
func TestRetryTurns(t *testing.T) {
	const backoff = 10 * time.Millisecond
	r := newRetryTurns(2, 3)
	for range 3 {
		assert.Equal(t, backoff, r.after("mallory", backoff), "within the burst")
	}
	assert.Greater(t, r.after("mallory", backoff), 400*time.Millisecond, "past the burst: half a second a turn")
	assert.Greater(t, r.after("mallory", backoff), 900*time.Millisecond, "the next turn after it")
	assert.Equal(t, 5*time.Second, r.after("mallory", 5*time.Second), "a backoff longer than the wait")
	assert.Equal(t, backoff, r.after("victim", backoff), "another namespace's turns")
	assert.Nil(t, newRetryTurns(0, 3))
	assert.Nil(t, newRetryTurns(-1, 3))
	assert.Equal(t, backoff, (*retryTurns)(nil).after("mallory", backoff))
}
