package delivery

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// The budget gives up, of an event it fetched at stream sequence seq and an
// event waiting for its next attempt, the one earlier in the stream
// (schedule's worker.shed): takeOlder hands over the oldest waiting event only when it
// is earlier than seq, never one at seq or later, and the event it hands
// over is no longer waiting: its next attempt never comes.
func TestTakeOlderHandsOverTheOldestWaitingEventEarlierThanSeq(t *testing.T) {
	var rs Retries
	attempts := make(chan uint64, 8)
	wait := func(seq uint64, delay time.Duration) *pull.Msg {
		e := pull.NewMsg(&nats.Msg{Subject: "kfn.events"}, &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: seq}})
		require.True(t, rs.Add(e, delay, func(*pull.Msg) { attempts <- seq }))
		return e
	}
	wait(7, time.Hour)
	wait(3, 20*time.Millisecond) // due soon: taken first, it must never be attempted
	wait(5, time.Hour)

	assert.Nil(t, rs.TakeOlder(3), "no event waiting is earlier than sequence 3 (3 itself is not)")
	assert.Nil(t, rs.TakeOlder(1))
	got := rs.TakeOlder(6)
	require.NotNil(t, got)
	assert.Equal(t, uint64(3), streamSeq(got), "the oldest earlier than 6, not any earlier one")
	got = rs.TakeOlder(6)
	require.NotNil(t, got)
	assert.Equal(t, uint64(5), streamSeq(got))
	assert.Nil(t, rs.TakeOlder(6), "7 is not earlier than 6")
	assert.Equal(t, 1, rs.Len(), "only 7 still waits")

	// An event due after the one taken is attempted; the taken one never is.
	wait(9, 40*time.Millisecond)
	select {
	case seq := <-attempts:
		assert.Equal(t, uint64(9), seq, "the event handed over was attempted too")
	case <-time.After(10 * time.Second):
		t.Fatal("the event due in 40 ms was never attempted")
	}
	assert.Empty(t, attempts)
}

// Close hands over an event whose timer fired while Close waited for the
// lock (its due not called yet): due is never called for it, so Close
// must return it, or the worker that stops would neither attempt it nor
// hand it back, and its heartbeat would keep it in progress for ever (an
// ordered Subscription then waited for it, stuck, under load in CI).
func TestCloseHandsOverAnEventWhoseTimerFiredAsItClosed(t *testing.T) {
	var rs Retries
	attempts := make(chan struct{}, 1)
	e := pull.NewMsg(&nats.Msg{Subject: "kfn.events"}, &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: 1}})
	require.True(t, rs.Add(e, time.Hour, func(*pull.Msg) { attempts <- struct{}{} }))
	r := rs.byID[e]

	// Fire the timer while the lock is held: its function waits for it.
	rs.mu.Lock()
	r.timer.Reset(0)
	require.Eventually(t, func() bool {
		if r.timer.Stop() {
			r.timer.Reset(0) // not fired yet: stopped, so set again
			return false
		}
		return true
	}, 10*time.Second, time.Millisecond, "the timer never fired")
	out := rs.closeLocked()
	rs.mu.Unlock()

	assert.Contains(t, out, e, "an event whose timer fired during Close was lost")
	assert.Never(t, func() bool { return len(attempts) > 0 }, 100*time.Millisecond, 5*time.Millisecond,
		"an event Close handed over was attempted too")
}
