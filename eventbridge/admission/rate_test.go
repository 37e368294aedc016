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
	require.NoError(t, r.Wait(t.Context(), "a", 1, time.Second), "a full bucket: at once")
	start := time.Now()
	require.NoError(t, r.Wait(t.Context(), "a", 1, time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "waited for the refill")

	slow := admission.NewRates(0.01, 1, 0, 0) // one event every 100 s
	require.NoError(t, slow.Take("a", 1))
	err := slow.Wait(t.Context(), "a", 1, time.Second)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "namespace a stores 0.01 events a second (bursts of 1), and its next one is more than 1s away")

	r = admission.NewRates(1, 1, 0, 0)
	require.NoError(t, r.Take("b", 1))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Wait(ctx, "b", 1, time.Minute), context.DeadlineExceeded)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, r.Wait(ctx2, "b", 1, 1200*time.Millisecond), context.DeadlineExceeded,
		"the turn the first gave back is the one it had: the second waits about a second, not two")

	var none *admission.Rates
	require.NoError(t, none.Wait(t.Context(), "a", 1, 0))
}

// TestBytesAreEachNamespacesOwn: with a rate of bytes, a namespace's
// bytes past its burst are refused, naming the bound, while its events
// are not, another namespace keeps its bytes, and the senders without a
// namespace have their own; a reply (Wait) of more bytes than come within
// maxWait is refused and gives back the event it took, and one that fits
// waits for its bytes.
func TestBytesAreEachNamespacesOwn(t *testing.T) {
	r := admission.NewRates(0.001, 12, 0, 0) // 12 events, then none for 1,000 s
	r.LimitBytes(1000, 4000, 10, 100)        // 1,000 bytes a second, bursts of 4,000
	require.NoError(t, r.TakeBytes("a", 3000))
	err := r.TakeBytes("a", 2000)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "namespace a may store 1000 bytes a second (bursts of 4000)")
	require.NoError(t, r.TakeBytes("a", 1000), "a refused take takes nothing")
	require.NoError(t, r.Take("a", 10), "the namespace's events are another bucket")
	require.NoError(t, r.TakeBytes("b", 4000), "another namespace's bytes are its own")
	require.NoError(t, r.TakeBytes("", 100))
	err = r.TakeBytes("", 1)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "publishers without a namespace (together) may store 10 bytes")

	// a has no bytes left: 2,000 more are 2 s away.
	err = r.Wait(t.Context(), "a", 2000, time.Second)
	require.ErrorIs(t, err, admission.ErrTooManyEvents)
	assert.Contains(t, err.Error(), "namespace a stores 1000 bytes a second (bursts of 4000), and its next 2000 are more than 1s away")
	start := time.Now()
	require.NoError(t, r.Wait(t.Context(), "a", 50, time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "waited for 50 bytes")

	// The refused Wait gave its event back: of the 12, 10 were taken above
	// and 1 by the Wait that waited (which would have been refused, its
	// event 1,000 s away, had the other kept one).
	require.NoError(t, r.Take("a", 1))
	require.ErrorIs(t, r.Take("a", 1), admission.ErrTooManyEvents)

	require.ErrorIs(t, r.TakeBytes("b2", 1<<40), admission.ErrTooManyEvents, "more than any burst, however large")
	// A reply without a sender takes from the buckets without a namespace.
	require.ErrorIs(t, r.Wait(t.Context(), "", 50, time.Second), admission.ErrTooManyEvents, "the sender-less bytes are spent (50 more: 5 s away)")

	var none *admission.Rates
	require.NoError(t, none.TakeBytes("a", 1<<40))
	unbounded := admission.NewRates(0, 0, 0, 0)
	unbounded.LimitBytes(0, 0, 0, 0)
	require.NoError(t, unbounded.TakeBytes("a", 1<<40))
	require.NoError(t, unbounded.TakeBytes("", 1<<40))
	require.NoError(t, unbounded.Wait(t.Context(), "a", 1<<40, 0))
	require.NoError(t, unbounded.Wait(t.Context(), "", 1<<40, 0))
}
