package logging

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// TestBudgetBoundsEachKeysLines: a key's lines past its burst are
// refused and counted, told once to its next line; another key's are its
// own; a nil Budget refuses none.
func TestBudgetBoundsEachKeysLines(t *testing.T) {
	b := NewBudget(0.001) // bursts of 1 (ten seconds' worth, at least one)
	ok, dropped := b.Take("a")
	assert.True(t, ok)
	assert.Zero(t, dropped)
	for range 3 {
		ok, _ = b.Take("a")
		assert.False(t, ok, "past the burst")
	}
	ok, dropped = b.Take("b")
	assert.True(t, ok, "another key's lines are its own")
	assert.Zero(t, dropped)

	b.perKey = ratelimit.NewPerKey(1000, 1000) // the refill, at once
	ok, dropped = b.Take("a")
	assert.True(t, ok)
	assert.Equal(t, int64(3), dropped, "the next line is told how many were dropped")
	_, dropped = b.Take("a")
	assert.Zero(t, dropped, "once")

	var none *Budget
	ok, _ = none.Take("a")
	assert.True(t, ok)
	assert.Nil(t, NewBudget(0))
}
