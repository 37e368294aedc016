package dev

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// looks returns a look that answers the fingerprints of seq in turn (the
// last one from then on), and how many times it was asked.
func looks(seq ...string) (func() string, *int) {
	n := 0
	return func() string {
		n++
		return seq[min(n, len(seq))-1]
	}, &n
}

// A change is read once two looks a pause apart agree: a file truncated at
// the first look and written by the next is never read empty.
func TestSettleWaitsForTwoLooksThatAgree(t *testing.T) {
	look, n := looks("written", "written")
	assert.Equal(t, "written", settle(context.Background(), "truncated", look, time.Millisecond, time.Minute))
	assert.Equal(t, 2, *n, "the first look differs from the change seen, the second agrees")

	look, n = looks("same")
	assert.Equal(t, "same", settle(context.Background(), "same", look, time.Millisecond, time.Minute))
	assert.Equal(t, 1, *n, "a change that looks the same once more is read at once")

	look, n = looks("a", "b", "c", "c")
	assert.Equal(t, "c", settle(context.Background(), "start", look, time.Millisecond, time.Minute))
	assert.Equal(t, 4, *n)
}

// A project that never stops changing (a file rewritten all the time) is
// read as it is after the limit, not waited for forever; a cancelled
// watch stops waiting.
func TestSettleIsBounded(t *testing.T) {
	i := 0
	changing := func() string { i++; return string(rune('a' + i%26)) }
	got := settle(context.Background(), "start", changing, time.Millisecond, 50*time.Millisecond)
	assert.NotEqual(t, "start", got, "the last look is read")
	assert.Greater(t, i, 1)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	look, n := looks("other")
	assert.Equal(t, "start", settle(ctx, "start", look, time.Hour, time.Hour))
	assert.Zero(t, *n)
}
