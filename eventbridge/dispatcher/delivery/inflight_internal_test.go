package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInFlightBoundsEachNamespaceAndTheTotal: with 4 in flight in all and
// 2 per namespace, a namespace past its own bound waits while another
// takes what is left; once the total is full, what ends goes to the
// namespace waiting that has the fewest in flight, not to the one asking
// first; a wait that ends with its context takes nothing and says which
// bound held it.
func TestInFlightBoundsEachNamespaceAndTheTotal(t *testing.T) {
	f := newInFlight(4, 2)
	ctx := context.Background()
	require.NoError(t, f.acquire(ctx, "a"))
	require.NoError(t, f.acquire(ctx, "a"))

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err := f.acquire(short, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "namespace a has 2 deliveries in flight, its bound")

	require.NoError(t, f.acquire(ctx, "b"))
	require.NoError(t, f.acquire(ctx, "b"))
	short2, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	err = f.acquire(short2, "c")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "the dispatcher has 4 deliveries in flight, its bound")

	// a waits (first), then c: what b ends goes to c, which has none, and
	// a's wait goes on (a is at its bound anyway).
	got := make(chan string, 2)
	go func() { _ = f.acquire(ctx, "a"); got <- "a" }()
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiting["a"]) == 1 }, time.Second, time.Millisecond)
	go func() { _ = f.acquire(ctx, "c"); got <- "c" }()
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiting["c"]) == 1 }, time.Second, time.Millisecond)
	f.release("b")
	assert.Equal(t, "c", <-got, "the namespace with the fewest in flight")
	f.release("a")
	assert.Equal(t, "a", <-got, "a, under its bound again")

	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, 4, f.used)
	assert.Equal(t, map[string]int{"a": 2, "b": 1, "c": 1}, f.byNS)
	assert.Empty(t, f.waiting)

	var none *inFlight
	require.NoError(t, none.acquire(ctx, "a"))
	none.release("a")
	assert.Nil(t, newInFlight(0, 5))
}
