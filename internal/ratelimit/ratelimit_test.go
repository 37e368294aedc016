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

// TestDebitTakesWhatIsNotHeldDownToOneBurstOfDebt: a debit empties the
// bucket and owes the rest, which the next takes wait for; a debt is one
// burst at most, so that nothing debited keeps a key refused for longer
// than a burst's refill more
// than an empty bucket.
func TestDebitTakesWhatIsNotHeldDownToOneBurstOfDebt(t *testing.T) {
	p := NewPerKey(10, 10)
	now := time.Now()
	p.Debit("a", now, 15)
	require.False(t, p.AllowN("a", now, 1), "the debit took the bucket's 10 and owes 5")
	require.False(t, p.AllowN("a", now.Add(500*time.Millisecond), 1), "half a second refills what was owed only")
	require.True(t, p.AllowN("a", now.Add(600*time.Millisecond), 1), "then the refill is the bucket's again")

	p.Debit("b", now, 1_000_000)
	require.False(t, p.AllowN("b", now.Add(1050*time.Millisecond), 1), "a debt of one burst: 11 tokens to refill before the next")
	require.True(t, p.AllowN("b", now.Add(1150*time.Millisecond), 1), "and no more")

	p.Debit("d", now, 11)
	require.False(t, p.AllowN("d", now.Add(150*time.Millisecond), 1), "11 debited: 10 held and 1 owed")
	require.True(t, p.AllowN("d", now.Add(250*time.Millisecond), 1))

	p.Debit("c", now, 0)
	p.Debit("c", now, -5)
	require.True(t, p.AllowN("c", now, 10), "nothing debited for n <= 0")
}
