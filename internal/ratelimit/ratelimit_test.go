package ratelimit

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEachKeyHasItsOwnBucket(t *testing.T) {
	p := NewPerKey(1, 3)
	now := time.Now()
	require.True(t, p.AllowN("a", now, 3))
	require.False(t, p.AllowN("a", now, 1), "a's bucket is empty")
	require.True(t, p.AllowN("b", now, 3), "b's bucket is not a's")
	require.False(t, p.AllowN("b", now, 1))
	require.True(t, p.AllowN("a", now.Add(time.Second), 1), "a second refills a token")
	require.False(t, p.AllowN("c", now, 4), "more than the burst is never allowed")
	require.True(t, p.AllowN("c", now, 3), "a refusal takes nothing")
	require.Equal(t, 1.0, p.Rate())
	require.Equal(t, 3, p.Burst())
}

// TestFullBucketsAreForgottenEmptyOnesKept: past maxKept keys, the full
// buckets are dropped (a new key gets one alike) and the emptied ones
// stay, so that a caller does not get a new burst by making up keys.
func TestFullBucketsAreForgottenEmptyOnesKept(t *testing.T) {
	p := NewPerKey(1, 2)
	now := time.Now()
	require.True(t, p.AllowN("spent", now, 2))
	for i := 0; len(p.buckets) < maxKept; i++ {
		p.AllowN("k"+strconv.Itoa(i), now, 0)
	}
	require.True(t, p.AllowN("new", now, 1))
	require.LessOrEqual(t, len(p.buckets), 2, "the full buckets are forgotten")
	require.False(t, p.AllowN("spent", now, 1), "an emptied bucket is kept")
}
