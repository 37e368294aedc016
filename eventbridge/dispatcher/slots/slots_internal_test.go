package slots

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// testShares is shares on a clock the test moves, recording the turns it
// runs instead of running them, and waking nobody (the test calls tick).
type testShares struct {
	*Shares
	now time.Time
	ran []ran
}

// ran is a turn run, as it was when it ran (turns are used again).
type ran struct {
	t         *Turn
	namespace string
	w         Handler
	slot      bool
}

func newTestShares(slots int, opts ...Option) *testShares {
	ts := &testShares{now: time.Unix(1000, 0)}
	ts.Shares = New(slots, 10*time.Millisecond, func(t pull.Task) {
		tn := t.(*Turn)
		ts.ran = append(ts.ran, ran{t: tn, namespace: tn.sp.name, w: tn.h, slot: tn.slot})
	}, opts...)
	ts.Shares.now = func() time.Time { return ts.now }
	ts.wake = nil
	return ts
}

// testWorker is a worker that has joined the shares; its turns run
// nothing (testShares records them).
type testWorker struct{ space *Space }

func (*testWorker) HandleTurn(*Turn) {}

// worker returns a worker of namespace that has joined the shares.
func (ts *testShares) worker(namespace string) *testWorker {
	return &testWorker{space: ts.Join(namespace)}
}

// submit submits n events of w.
func (ts *testShares) submit(w *testWorker, n int) {
	for range n {
		ts.Submit(w, w.space, &pull.Msg{})
	}
}

// finish ends the oldest turn that runs and is not finished yet, and
// returns the namespace of the turn that ran after it, "" if none did.
func (ts *testShares) finishOldest(running *int) string {
	t := ts.ran[*running].t
	*running++
	n := len(ts.ran)
	ts.done(t)
	if len(ts.ran) == n {
		return ""
	}
	return ts.ran[n].namespace
}

func (ts *testShares) namespaces() []string {
	var out []string
	for _, r := range ts.ran {
		out = append(out, r.namespace)
	}
	return out
}

// TestSharesLetANamespaceAloneUseAllButTheKeptSlots: with no other
// namespace, one namespace's turns take every slot but the quarter kept
// for namespaces that run few, and the next when one frees (work-
// conserving up to the kept quarter).
func TestSharesLetANamespaceAloneUseAllButTheKeptSlots(t *testing.T) {
	ts := newTestShares(8)
	w := ts.worker("mallory")
	ts.submit(w, 20)
	require.Len(t, ts.ran, 6, "every slot but the kept two taken at once")
	running := 0
	for i := range 14 {
		assert.Equal(t, "mallory", ts.finishOldest(&running), "turn %d", 7+i)
	}
	assert.Len(t, ts.ran, 20)
}

// TestSharesKeepAQuarterForNamespacesThatRunFew: while one namespace runs
// every slot it may, another's turns take the kept ones at once, as many
// as are kept.
func TestSharesKeepAQuarterForNamespacesThatRunFew(t *testing.T) {
	ts := newTestShares(8)
	attacker, victim := ts.worker("mallory"), ts.worker("bank")
	ts.submit(attacker, 100)
	ts.submit(victim, 3)
	assert.Equal(t, []string{"mallory", "mallory", "mallory", "mallory", "mallory", "mallory", "bank", "bank"}, ts.namespaces())
}

// TestSharesGiveEachWaitingNamespaceAnEqualShare: a namespace whose 300
// events (a fan-out, say) fill its slots and its queue does not keep
// another's 30 behind them: the other's first takes a kept slot at once,
// and each slot that frees goes to the namespace that runs the fewest,
// so the other's turns run as slots free, at least as many as the
// first's, until all have run.
func TestSharesGiveEachWaitingNamespaceAnEqualShare(t *testing.T) {
	ts := newTestShares(4)
	attacker, victim := ts.worker("mallory"), ts.worker("bank")
	ts.submit(attacker, 300)
	ts.submit(victim, 30)
	require.Equal(t, []string{"mallory", "mallory", "mallory", "bank"}, ts.namespaces())
	running := 0
	for len(ts.ran) < 4+60 {
		ts.finishOldest(&running)
		require.LessOrEqual(t, len(ts.ran)-running, 4, "turns running")
	}
	victims := 0
	for _, ns := range ts.namespaces()[4:64] {
		if ns == "bank" {
			victims++
		}
	}
	assert.Equal(t, 29, victims, "the rest of the victim's turns among the next 60")
	for running < len(ts.ran) {
		ts.finishOldest(&running)
	}
	assert.Len(t, ts.ran, 330, "every turn ran")
}

// TestSharesTakeBackTheSlotsOfTurnsThatHoldThemPastTheirTime: turns whose
// sink never answers hold their slots for two SlotTimes at most; then the
// slots go to the waiting turns, one to each namespace.
func TestSharesTakeBackTheSlotsOfTurnsThatHoldThemPastTheirTime(t *testing.T) {
	ts := newTestShares(2)
	attacker, victim := ts.worker("mallory"), ts.worker("bank")
	ts.submit(attacker, 5)
	ts.submit(victim, 1)
	require.Len(t, ts.ran, 2)
	ts.now = ts.now.Add(ts.quantum)
	ts.tick()
	assert.Len(t, ts.ran, 2, "a turn holds its slot in the SlotTime after its own")
	ts.now = ts.now.Add(ts.quantum)
	ts.tick()
	require.Len(t, ts.ran, 4)
	assert.ElementsMatch(t, []string{"mallory", "bank"}, ts.namespaces()[2:], "one slot to each")
	// A turn that ends after its slot was taken back frees none.
	ts.done(ts.ran[0].t)
	assert.Len(t, ts.ran, 4)
	for _, r := range ts.ran[2:4] {
		if r.namespace == "bank" {
			ts.done(r.t)
		}
	}
	require.Len(t, ts.ran, 5)
	assert.Equal(t, "mallory", ts.ran[4].namespace, "the victim's slot, freed")
}

// TestSharesRunTheWaitingTurnsOfAStoppingWorker: a worker that stops has
// its waiting turns run at once, without a slot, so that it can end; the
// turns of the namespace's other workers keep waiting.
func TestSharesRunTheWaitingTurnsOfAStoppingWorker(t *testing.T) {
	ts := newTestShares(1)
	a, b := ts.worker("mallory"), ts.worker("mallory")
	ts.submit(a, 3)
	ts.submit(b, 2)
	require.Len(t, ts.ran, 1)
	ts.Drop(a, a.space)
	require.Len(t, ts.ran, 3)
	assert.False(t, ts.ran[1].slot)
	assert.False(t, ts.ran[2].slot)
	ts.done(ts.ran[1].t) // a dropped turn frees no slot
	assert.Len(t, ts.ran, 3)
	ts.done(ts.ran[0].t)
	require.Len(t, ts.ran, 4)
	assert.Same(t, b, ts.ran[3].w.(*testWorker))
}

// TestSharesLetTurnsThatWaitForTheirSinkGiveTheirSlotBack: a turn that
// pauses (its request sent, the sink working) frees its slot for a
// waiting turn; when it resumes it waits for a slot again, before the
// turns of its namespace that have not started.
func TestSharesLetTurnsThatWaitForTheirSinkGiveTheirSlotBack(t *testing.T) {
	ts := newTestShares(1)
	w := ts.worker("mallory")
	ts.submit(w, 3)
	require.Len(t, ts.ran, 1)
	first := ts.ran[0].t
	first.Pause()
	require.Len(t, ts.ran, 2, "the slot it gave back went to the next turn")
	resumed := make(chan struct{})
	go func() { first.Resume(); close(resumed) }()
	require.Eventually(t, func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(w.space.resumed) == 1
	}, 5*time.Second, time.Millisecond, "waiting for a slot")
	ts.done(ts.ran[1].t)
	<-resumed
	assert.True(t, first.slot, "the slot went to the turn that resumed")
	assert.Len(t, ts.ran, 2, "not to the turn that had not started")
	ts.done(first)
	assert.Len(t, ts.ran, 3)
}

// TestSharesRenewTheSlotsTakenBackWhileTheSinkWorked: a turn whose slot
// was taken back (its sink took two SlotTimes) takes one again for what
// follows, waiting for it when none is free; one whose slot was not
// taken back goes on with it.
func TestSharesRenewTheSlotsTakenBackWhileTheSinkWorked(t *testing.T) {
	ts := newTestShares(1)
	w := ts.worker("mallory")
	ts.submit(w, 1)
	quick := ts.ran[0].t
	quick.Renew()
	assert.True(t, quick.slot)
	ts.done(quick)

	ts.submit(w, 1)
	slow := ts.ran[1].t
	ts.now = ts.now.Add(2 * ts.quantum)
	ts.submit(w, 1) // takes the slot taken back
	require.Len(t, ts.ran, 3)
	renewed := make(chan struct{})
	go func() { slow.Renew(); close(renewed) }()
	require.Eventually(t, func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(w.space.resumed) == 1
	}, 5*time.Second, time.Millisecond, "waiting for a slot")
	ts.done(ts.ran[2].t)
	<-renewed
	assert.True(t, slow.slot)
}

// TestSharesCountATurnOffInTheSlotTimeItEnds: a turn that ends in the
// SlotTime after the one it took its slot in frees it in its namespace's
// count too, however long since the namespace was last counted.
func TestSharesCountATurnOffInTheSlotTimeItEnds(t *testing.T) {
	ts := newTestShares(8)
	w := ts.worker("mallory")
	ts.submit(w, 2)
	ts.now = ts.now.Add(ts.quantum)
	ts.done(ts.ran[0].t)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	assert.Equal(t, 1, w.space.sync(ts.epoch), "one of the two still runs")
	assert.Equal(t, 1, ts.cur+ts.prev)
}

// TestSharesHoldANamespaceToItsTurnsWhileAnotherIsActive: with
// WithPerNamespace(2), a namespace's burst runs two turns at a time while
// another namespace has turns waiting or had a slot in the last
// ActiveSlotTimes, though slots are free; alone, it takes what the slots
// allow, at once, and again once the other has been idle that long.
func TestSharesHoldANamespaceToItsTurnsWhileAnotherIsActive(t *testing.T) {
	alone := newTestShares(8, WithPerNamespace(2))
	alone.submit(alone.worker("mallory"), 3)
	require.Len(t, alone.ran, 3, "a namespace alone, none of its turns waiting, is held to nothing")

	ts := newTestShares(8, WithPerNamespace(2))
	attacker, victim := ts.worker("mallory"), ts.worker("bank")
	ts.submit(attacker, 20)
	require.Len(t, ts.ran, 6, "alone: every slot but the kept two")
	running := 0
	for range 6 {
		ts.finishOldest(&running)
	}
	require.Len(t, ts.ran, 12, "alone, each slot that frees goes on to the next")

	ts.submit(victim, 1)
	require.Equal(t, "bank", ts.ran[12].namespace, "the victim's turn runs at once")
	for range 4 {
		assert.Equal(t, "", ts.finishOldest(&running), "the attacker runs 6, past its 2: no more while bank is active")
	}
	for range 2 {
		assert.Equal(t, "mallory", ts.finishOldest(&running), "down to 1, it runs its second")
	}
	require.Len(t, ts.ran, 15)
	ts.now = ts.now.Add(10 * time.Millisecond)
	ts.tick()
	assert.Len(t, ts.ran, 15, "bank had a slot a SlotTime ago: still active, the attacker runs its 2")

	ts.done(ts.ran[12].t) // bank's turn ends
	ts.now = ts.now.Add(time.Duration(ActiveSlotTimes-1) * 10 * time.Millisecond)
	ts.tick()
	assert.Len(t, ts.ran, 17, "ActiveSlotTimes after bank's slot: still active; the attacker's 2 took their slots back, 2 more run")
	ts.now = ts.now.Add(10 * time.Millisecond)
	ts.tick()
	assert.Len(t, ts.ran, 21, "bank idle for longer: the attacker's other 4 take the free slots")
	for _, r := range ts.ran[15:] {
		assert.Equal(t, "mallory", r.namespace)
	}
}

// TestSharesHoldEachOfTwoBusyNamespacesToItsTurns: two namespaces with
// bursts waiting each run at most their turns at once, and share the
// slots that free.
func TestSharesHoldEachOfTwoBusyNamespacesToItsTurns(t *testing.T) {
	ts := newTestShares(8, WithPerNamespace(2))
	a, b := ts.worker("a"), ts.worker("b")
	ts.submit(a, 1)
	ts.submit(b, 10)
	ts.submit(a, 10)
	count := func() (na, nb int) {
		for _, r := range ts.ran {
			if r.namespace == "a" {
				na++
			} else {
				nb++
			}
		}
		return na, nb
	}
	na, nb := count()
	assert.Equal(t, 2, na)
	assert.Equal(t, 2, nb, "b is held to 2 while a is active")
	running := 0
	for running < 21 && running < len(ts.ran) {
		ts.finishOldest(&running)
		assert.LessOrEqual(t, len(ts.ran)-running, 4, "two each at most")
	}
	assert.Len(t, ts.ran, 21, "every turn ran")
}
