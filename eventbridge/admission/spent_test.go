package admission_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
)

// TestSpentIsWhatWasTakenSinceTheLastAsk: once recording, every take that
// a bounded bucket allowed (events, bytes, a reply's wait) is told once,
// per sender; refused takes and unbounded buckets are not.
func TestSpentIsWhatWasTakenSinceTheLastAsk(t *testing.T) {
	r := admission.NewRates(0.001, 5, 0, 0)
	r.LimitBytes(0.001, 1000, 0.001, 100)
	require.NoError(t, r.Take("a", 1))
	spent, _ := r.TakeSpent()
	assert.Empty(t, spent, "nothing is recorded before RecordSpent")

	r.RecordSpent()
	require.NoError(t, r.Take("a", 2))
	require.NoError(t, r.TakeBytes("a", 300))
	require.ErrorIs(t, r.TakeBytes("a", 800), admission.ErrTooManyEvents)
	require.NoError(t, r.Wait(context.Background(), "b", 40, time.Second))
	require.NoError(t, r.Take("", 7), "the sender-less events are not bounded")
	require.NoError(t, r.TakeBytes("", 60))
	require.NoError(t, r.Take("c", 0), "nothing taken, nothing told")

	spent, dropped := r.TakeSpent()
	sort.Slice(spent, func(i, j int) bool { return spent[i].Namespace < spent[j].Namespace })
	assert.Equal(t, []admission.Spent{
		{Namespace: "", Bytes: 60},
		{Namespace: "a", Events: 2, Bytes: 300},
		{Namespace: "b", Events: 1, Bytes: 40},
	}, spent)
	assert.Zero(t, dropped)
	spent, _ = r.TakeSpent()
	assert.Empty(t, spent, "told once")
}

// TestDebitTakesWhatAnotherHolderTook: what another replica took of a
// namespace's bound is taken from this one's buckets, so that the bound
// holds for both together; another namespace keeps its own.
func TestDebitTakesWhatAnotherHolderTook(t *testing.T) {
	r := admission.NewRates(0.001, 5, 0.001, 5)
	r.LimitBytes(0.001, 1000, 0.001, 1000)
	r.Debit(admission.Spent{Namespace: "a", Events: 4})
	require.NoError(t, r.Take("a", 1))
	require.ErrorIs(t, r.Take("a", 1), admission.ErrTooManyEvents, "4 of 5 taken elsewhere")
	r.Debit(admission.Spent{Namespace: "a", Bytes: 5000})
	require.ErrorIs(t, r.TakeBytes("a", 1), admission.ErrTooManyEvents, "its bytes too")
	require.NoError(t, r.Take("b", 5), "another namespace's bucket is untouched")
	r.Debit(admission.Spent{Events: 5, Bytes: 1000})
	require.ErrorIs(t, r.Take("", 1), admission.ErrTooManyEvents, "the sender-less bucket alike")
	require.ErrorIs(t, r.TakeBytes("", 1), admission.ErrTooManyEvents)
	r.Debit(admission.Spent{Namespace: "b", Events: -5, Bytes: -5})
	var none *admission.Rates
	none.Debit(admission.Spent{Namespace: "a", Events: 1})
	none.RecordSpent()
	spent, _ := none.TakeSpent()
	assert.Empty(t, spent, "nil Rates record and debit nothing")
}

// TestSpentKeepsABoundedNumberOfSenders: past 16,384 senders in one
// interval, what new senders take is counted as dropped, not kept.
func TestSpentKeepsABoundedNumberOfSenders(t *testing.T) {
	r := admission.NewRates(1e9, 1<<20, 0, 0)
	r.RecordSpent()
	for i := range 16384 + 2 {
		require.NoError(t, r.Take(fmt.Sprintf("ns-%d", i), 1))
	}
	require.NoError(t, r.Take("ns-0", 1), "a sender kept goes on being told")
	spent, dropped := r.TakeSpent()
	assert.Len(t, spent, 16384)
	assert.Equal(t, int64(2), dropped)
	for _, s := range spent {
		if s.Namespace == "ns-0" {
			assert.Equal(t, int64(2), s.Events)
		}
	}
}
