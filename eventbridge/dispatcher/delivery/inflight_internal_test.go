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

// TestInFlightNeverPassesABound: a namespace at its own bound waits even
// when the total has room; with the total full, one release lets one
// waiter go, the one of the namespace with the fewest in flight (d, with
// one, waits behind c, with none); a namespace whose last ends is
// forgotten; a bound per namespace of 0, or above the total, is the total.
func TestInFlightNeverPassesABound(t *testing.T) {
	ctx := context.Background()
	f := newInFlight(4, 2)
	require.NoError(t, f.acquire(ctx, "a"))
	require.NoError(t, f.acquire(ctx, "a"))
	require.NoError(t, f.acquire(ctx, "b"))
	waiters := map[string]chan struct{}{}
	wait := func(ns, key string) {
		done := make(chan struct{})
		waiters[key] = done
		go func() { _ = f.acquire(ctx, ns); close(done) }()
		require.Eventually(t, func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			n := 0
			for _, q := range f.waiting {
				n += len(q)
			}
			return n == len(waiters)-countClosed(waiters)
		}, time.Second, time.Millisecond)
	}
	wait("a", "a3")
	f.release("b") // the total has room (2 of 4), a is at its bound
	f.mu.Lock()
	assert.Equal(t, 2, f.byNS["a"], "a, at its bound, still waits")
	assert.Len(t, f.waiting["a"], 1)
	assert.NotContains(t, f.byNS, "b", "b's last ended: forgotten")
	f.mu.Unlock()

	require.NoError(t, f.acquire(ctx, "d"))
	require.NoError(t, f.acquire(ctx, "e")) // 4 of 4
	wait("d", "d2")
	wait("c", "c1")
	f.release("e") // grants, under the lock, before it returns
	f.mu.Lock()
	assert.Equal(t, 1, f.byNS["c"], "c, with none in flight, first")
	assert.Len(t, f.waiting["d"], 1, "d, with one, waits: one ended, one goes")
	assert.Equal(t, 4, f.used)
	f.mu.Unlock()
	require.Eventually(t, func() bool { return closed(waiters["c1"]) }, time.Second, time.Millisecond)

	assert.Equal(t, 4, newInFlight(4, 0).perNamespace)
	assert.Equal(t, 4, newInFlight(4, 10).perNamespace)
	assert.Equal(t, 3, newInFlight(4, 3).perNamespace)
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func countClosed(m map[string]chan struct{}) int {
	n := 0
	for _, ch := range m {
		if closed(ch) {
			n++
		}
	}
	return n
}
