package seats_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/seats"
)

// enterNow takes a seat that must be free.
func enterNow(t *testing.T, g *seats.Gate, key string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a seat that is free is taken without a wait
	require.NoError(t, g.Enter(ctx, key), "a free seat for %s", key)
	return func() { g.Leave(key) }
}

// entering is an Enter that waits, on a goroutine of its own.
type entering struct {
	done  chan struct{}
	leave func()
	err   error
}

func enter(ctx context.Context, g *seats.Gate, key string) *entering {
	e := &entering{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.err = g.Enter(ctx, key)
		e.leave = func() { g.Leave(key) }
	}()
	return e
}

// wait waits for the Enter to return, 5 seconds at most.
func (e *entering) wait(t *testing.T) {
	t.Helper()
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
		t.Fatal("Enter did not return")
	}
}

func (e *entering) entered() bool {
	select {
	case <-e.done:
		return e.err == nil
	default:
		return false
	}
}

// waitQueued waits until key has n works waiting.
func waitQueued(t *testing.T, g *seats.Gate, key string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { _, w := g.Held(key); return w == n }, 5*time.Second, time.Millisecond, "%s waiting", key)
}

// TestAFlowHoldsItsSeatsAndWaitsInOrder: a flow takes its seats at once,
// its next works wait, and each seat that frees goes to the oldest.
func TestAFlowHoldsItsSeatsAndWaitsInOrder(t *testing.T) {
	g := seats.New(2)
	first, second := enterNow(t, g, "mallory"), enterNow(t, g, "mallory")
	var queued []*entering
	for i := range 5 {
		queued = append(queued, enter(context.Background(), g, "mallory"))
		waitQueued(t, g, "mallory", i+1) // in this order
	}
	held, waiting := g.Totals()
	assert.Equal(t, 2, held)
	assert.Equal(t, 5, waiting)
	first()
	queued[0].wait(t)
	require.NoError(t, queued[0].err, "the oldest first")
	for _, q := range queued[1:] {
		assert.False(t, q.entered())
	}
	second()
	queued[1].wait(t)
	require.NoError(t, queued[1].err)
	for _, q := range queued[2:] {
		assert.False(t, q.entered())
	}
	queued[0].leave()
	queued[1].leave()
	for _, q := range queued[2:4] {
		q.wait(t)
		require.NoError(t, q.err)
	}
	queued[2].leave()
	queued[3].leave()
	queued[4].wait(t)
	queued[4].leave()
	held, waiting = g.Totals()
	assert.Zero(t, held+waiting)
	held, waiting = g.Held("mallory")
	assert.Zero(t, held+waiting)
	assert.Zero(t, g.Flows(), "a flow that holds and waits for nothing is forgotten")
}

// TestAFullFlowHoldsNoOtherBack: while one flow holds its seats and has
// works waiting, another flow's work takes a seat of its own at once.
func TestAFullFlowHoldsNoOtherBack(t *testing.T) {
	g := seats.New(3)
	for range 3 {
		enterNow(t, g, "mallory")
	}
	for i := range 10 {
		enter(context.Background(), g, "mallory")
		waitQueued(t, g, "mallory", i+1)
	}
	leave := enterNow(t, g, "bank") // enterNow fails on a wait
	held, waiting := g.Held("bank")
	assert.Equal(t, 1, held)
	assert.Zero(t, waiting)
	leave()
}

// TestAFlowIsKeptWhileItHoldsASeat: a flow that gave one of its seats
// back and holds the other is still held to its bound (it is forgotten
// only when it holds and waits for nothing), and so is one whose waiter
// gave up while it holds its seats.
func TestAFlowIsKeptWhileItHoldsASeat(t *testing.T) {
	g := seats.New(2)
	first := enterNow(t, g, "a")
	enterNow(t, g, "a")
	first()
	enterNow(t, g, "a")
	blocked := enter(context.Background(), g, "a")
	waitQueued(t, g, "a", 1)
	assert.False(t, blocked.entered(), "two seats held, the third waits")
	held, waiting := g.Held("a")
	assert.Equal(t, 2, held)
	assert.Equal(t, 1, waiting)

	h := seats.New(1)
	enterNow(t, h, "b")
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := enter(ctx, h, "b")
	waitQueued(t, h, "b", 1)
	cancel()
	gaveUp.wait(t)
	again := enter(context.Background(), h, "b")
	waitQueued(t, h, "b", 1)
	assert.False(t, again.entered(), "the seat is still held")
}

func TestAWaitEndsWithItsContext(t *testing.T) {
	g := seats.New(1)
	leave := enterNow(t, g, "a")
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := enter(ctx, g, "a")
	waitQueued(t, g, "a", 1)
	next := enter(context.Background(), g, "a")
	waitQueued(t, g, "a", 2)
	cancel()
	gaveUp.wait(t)
	require.ErrorIs(t, gaveUp.err, context.Canceled)
	require.ErrorIs(t, gaveUp.err, seats.ErrFlowFull)
	assert.Equal(t, 1, g.Flows())
	_, waiting := g.Held("a")
	assert.Equal(t, 1, waiting, "a wait given up leaves the queue")
	leave()
	next.wait(t)
	require.NoError(t, next.err, "the seat goes past the wait given up")
	next.leave()
	again := enterNow(t, g, "a")
	blocked := enter(context.Background(), g, "a")
	waitQueued(t, g, "a", 1)
	assert.False(t, blocked.entered(), "one seat, held once")
	again()
	blocked.wait(t)
	blocked.leave()
	held, waiting := g.Totals()
	assert.Zero(t, held+waiting)
}

func TestNoBoundNeverWaits(t *testing.T) {
	g := seats.New(0)
	for range 1000 {
		enterNow(t, g, "a")
	}
	assert.Zero(t, g.PerFlow())
}

// TestATotalHandsTheFreedSeatToTheFlowWithFewest: with 4 seats in all and
// 2 per flow, a flow past its own bound waits while another takes what is
// left; once every seat is held, a seat that frees goes to the waiting
// flow that holds the fewest, not to the one that asked first; a wait
// that ends with its context takes nothing and says which bound held it.
func TestATotalHandsTheFreedSeatToTheFlowWithFewest(t *testing.T) {
	g := seats.New(2, seats.WithTotal(4))
	enterNow(t, g, "a")
	enterNow(t, g, "a")
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := g.Enter(short, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, seats.ErrFlowFull)

	leaveB := enterNow(t, g, "b")
	enterNow(t, g, "b")
	short2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	err = g.Enter(short2, "c")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, seats.ErrAllFull)
	assert.NotErrorIs(t, err, seats.ErrFlowFull)

	// a waits first, then c: what b gives back goes to c, which holds
	// none; a (at its bound anyway) goes on waiting.
	a := enter(context.Background(), g, "a")
	waitQueued(t, g, "a", 1)
	c := enter(context.Background(), g, "c")
	waitQueued(t, g, "c", 1)
	g.Leave("c") // c holds none: nothing is given back
	held, waiting := g.Totals()
	assert.Equal(t, 4, held)
	assert.Equal(t, 2, waiting)
	leaveB()
	c.wait(t)
	require.NoError(t, c.err, "the flow that holds the fewest")
	assert.False(t, a.entered())
	g.Leave("a")
	a.wait(t)
	require.NoError(t, a.err, "a, under its bound again")

	held, waiting = g.Totals()
	assert.Equal(t, 4, held)
	assert.Zero(t, waiting)
	for key, want := range map[string]int{"a": 2, "b": 1, "c": 1} {
		h, _ := g.Held(key)
		assert.Equal(t, want, h, key)
	}
}

// TestATotalIsNeverPassed: a flow at its own bound waits though the total
// has room; with the total full, one seat given back lets one work go,
// that of the flow holding the fewest (d, holding one, waits behind c,
// holding none); a flow whose last seat is given back is forgotten; a
// bound per flow of 0, or above the total, is the total.
func TestATotalIsNeverPassed(t *testing.T) {
	g := seats.New(2, seats.WithTotal(4))
	enterNow(t, g, "a")
	enterNow(t, g, "a")
	leaveB := enterNow(t, g, "b")
	a3 := enter(context.Background(), g, "a")
	waitQueued(t, g, "a", 1)
	leaveB() // the total has room (2 of 4), a is at its bound
	held, waiting := g.Held("a")
	assert.Equal(t, 2, held, "a, at its bound, still waits")
	assert.Equal(t, 1, waiting)
	assert.Equal(t, 1, g.Flows(), "b's last seat given back: forgotten")

	enterNow(t, g, "d")
	leaveE := enterNow(t, g, "e") // 4 of 4
	d2 := enter(context.Background(), g, "d")
	waitQueued(t, g, "d", 1)
	c1 := enter(context.Background(), g, "c")
	waitQueued(t, g, "c", 1)
	leaveE() // grants under the lock, before it returns
	held, _ = g.Held("c")
	assert.Equal(t, 1, held, "c, holding none, first")
	_, waiting = g.Held("d")
	assert.Equal(t, 1, waiting, "d, holding one, waits: one seat freed, one work goes")
	all, _ := g.Totals()
	assert.Equal(t, 4, all)
	c1.wait(t)
	assert.False(t, a3.entered())
	assert.False(t, d2.entered())

	assert.Equal(t, 4, seats.New(0, seats.WithTotal(4)).PerFlow())
	assert.Equal(t, 4, seats.New(10, seats.WithTotal(4)).PerFlow())
	assert.Equal(t, 3, seats.New(3, seats.WithTotal(4)).PerFlow())
	assert.Equal(t, 4, seats.New(3, seats.WithTotal(4)).Total())
	assert.Zero(t, seats.New(3, seats.WithTotal(-1)).Total())
}

// TestOfFlowsHoldingAsManyTheOneWaitingLongestGoesFirst: with the total
// full, a seat freed while two flows that hold as many seats wait goes to
// the one whose work came first, whatever their keys (tried 20 times: a
// map's order is not the waiting order).
func TestOfFlowsHoldingAsManyTheOneWaitingLongestGoesFirst(t *testing.T) {
	for range 20 {
		g := seats.New(2, seats.WithTotal(3))
		enterNow(t, g, "a")
		enterNow(t, g, "z")
		leaveC := enterNow(t, g, "c")
		z := enter(context.Background(), g, "z")
		waitQueued(t, g, "z", 1)
		a := enter(context.Background(), g, "a")
		waitQueued(t, g, "a", 1)
		leaveC()
		z.wait(t)
		require.NoError(t, z.err, "z waited longer than a, both holding one")
		assert.False(t, a.entered())
		g.Leave("z")
		a.wait(t)
		require.NoError(t, a.err)
	}
}

// TestSeatsAddUpUnderContention: flows entering, leaving and giving up at
// once, alone and beside a total below their bounds together, never hold
// more than the total nor a flow more than its seats, and leave none
// held.
func TestSeatsAddUpUnderContention(t *testing.T) {
	for _, c := range []struct{ perFlow, total int }{{3, 0}, {3, 5}} {
		t.Run(fmt.Sprintf("%d per flow, %d in all", c.perFlow, c.total), func(t *testing.T) {
			const flows = 4
			g := seats.New(c.perFlow, seats.WithTotal(c.total))
			var mu sync.Mutex
			inside, most, mostAll, all := map[string]int{}, 0, 0, 0
			var wg sync.WaitGroup
			for i := range 400 {
				wg.Go(func() {
					ctx := context.Background()
					if i%3 == 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*100*time.Microsecond)
						defer cancel()
					}
					key := string(rune('a' + i%flows))
					if err := g.Enter(ctx, key); err != nil {
						assert.ErrorIs(t, err, context.DeadlineExceeded)
						return
					}
					mu.Lock()
					inside[key]++
					all++
					most, mostAll = max(most, inside[key]), max(mostAll, all)
					mu.Unlock()
					time.Sleep(50 * time.Microsecond)
					mu.Lock()
					inside[key]--
					all--
					mu.Unlock()
					g.Leave(key)
				})
			}
			wg.Wait()
			assert.LessOrEqual(t, most, c.perFlow, "each flow held its seats, no more")
			if c.total > 0 {
				assert.LessOrEqual(t, mostAll, c.total, "all held the total, no more")
			}
			held, waiting := g.Totals()
			assert.Zero(t, held+waiting)
			assert.Zero(t, g.Flows())
			for range c.perFlow {
				enterNow(t, g, "z") // every seat is free again
			}
		})
	}
}

// TestTryEnterNeverWaits: TryEnter takes a free seat at once, and refuses
// at once when the flow holds its seats or the total is held; a refused
// flow is not kept; a seat that frees goes to a work waiting in Enter.
func TestTryEnterNeverWaits(t *testing.T) {
	g := seats.New(2, seats.WithTotal(3))
	require.True(t, g.TryEnter("a"))
	require.True(t, g.TryEnter("a"))
	assert.False(t, g.TryEnter("a"), "a holds its two seats")
	require.True(t, g.TryEnter("b"))
	assert.False(t, g.TryEnter("c"), "the total is held")
	assert.Equal(t, 2, g.Flows(), "c, refused, is not kept")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := enter(ctx, g, "b")
	waitQueued(t, g, "b", 1)
	g.Leave("a") // the freed seat goes to b's waiting work
	waiting.wait(t)
	require.NoError(t, waiting.err)
	g.Leave("a")
	g.Leave("b")
	require.True(t, g.TryEnter("b"), "b holds one: room again")
	assert.True(t, seats.New(0).TryEnter("x"), "no bound")
}
