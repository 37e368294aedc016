package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/admission"
)

// TestRatesAreEachNamespacesOwn takes a namespace's burst whole: its next
// event is refused, naming it, while another namespace and the senders
// without one keep theirs; nil Rates and a rate of 0 bound nothing.
func TestRatesAreEachNamespacesOwn(t *testing.T) {
	r := admission.NewRates(0.001, 3, 0.001, 2)
	require.NoError(t, r.Take("a", 3))
	err := r.Take("a", 1)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "namespace a may store 0.001 events a second (bursts of 3)")
	require.NoError(t, r.Take("b", 3), "another namespace's bucket is full")
	require.ErrorIs(t, r.Take("b", 1), admission.ErrTooManyEvents)

	require.NoError(t, r.Take("", 2))
	err = r.Take("", 1)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "publishers without a namespace (together)")

	require.ErrorIs(t, r.Take("c", 4), admission.ErrTooManyEvents, "more than a burst at once")
	require.NoError(t, r.Take("c", 3), "a refused take takes nothing")

	var none *admission.Rates
	require.NoError(t, none.Take("a", 1_000_000))
	unbounded := admission.NewRates(0, 0, 0, 0)
	require.NoError(t, unbounded.Take("a", 1_000_000))
	require.NoError(t, unbounded.Take("", 1_000_000))
}

// TestWaitWaitsForItsTurnOrRefuses: past its burst a sender's event waits
// for the refill when it comes within maxWait, is refused at once
// (taking nothing) when it would not, and gives its turn back when its
// context ends first.
func TestWaitWaitsForItsTurnOrRefuses(t *testing.T) {
	r := admission.NewRates(20, 1, 0, 0) // one event every 50 ms
	require.NoError(t, r.Wait(t.Context(), "a", time.Second), "a full bucket: at once")
	start := time.Now()
	require.NoError(t, r.Wait(t.Context(), "a", time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "waited for the refill")

	slow := admission.NewRates(0.01, 1, 0, 0) // one event every 100 s
	require.NoError(t, slow.Take("a", 1))
	err := slow.Wait(t.Context(), "a", time.Second)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "namespace a stores 0.01 events a second (bursts of 1), and its next one is more than 1s away")

	r = admission.NewRates(1, 1, 0, 0)
	require.NoError(t, r.Take("b", 1))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Wait(ctx, "b", time.Minute), context.DeadlineExceeded)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, r.Wait(ctx2, "b", 1200*time.Millisecond), context.DeadlineExceeded,
		"the turn the first gave back is the one it had: the second waits about a second, not two")

	var none *admission.Rates
	require.NoError(t, none.Wait(t.Context(), "a", 0))
}
