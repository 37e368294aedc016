package pull

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// progressMsg counts the in-progress beats it is given.
type progressMsg struct {
	jetstream.Msg
	beats atomic.Int32
}

func (m *progressMsg) InProgress() error { m.beats.Add(1); return nil }

// Every held message is beaten every interval until it is released; the
// beat stops when none is held and starts again with the next. That a
// released message is beaten no more is seen against the beats of one
// held after it: they come from the same timer, so two of them prove that
// the beats a released message would have had are past (one beat under
// way at its release may still reach it).
func TestHeartbeatBeatsHeldMessagesOnly(t *testing.T) {
	const interval = 20 * time.Millisecond
	var h Heartbeat
	a, b := &progressMsg{}, &progressMsg{}
	h.Hold(a, interval)
	h.Hold(b, interval)
	require.Eventually(t, func() bool { return a.beats.Load() >= 3 && b.beats.Load() >= 3 }, 5*time.Second, time.Millisecond)

	h.Release(a)
	n := a.beats.Load()
	require.Eventually(t, func() bool { return b.beats.Load() >= n+3 }, 5*time.Second, time.Millisecond)
	assert.LessOrEqual(t, a.beats.Load(), n+1, "a released message gets one beat more at most")

	h.Release(b)
	h.mu.Lock()
	stopped := len(h.events) == 0
	h.mu.Unlock()
	assert.True(t, stopped, "nothing left to beat")
	nb := b.beats.Load()

	c := &progressMsg{}
	h.Hold(c, interval)
	require.Eventually(t, func() bool { return c.beats.Load() >= 2 }, 5*time.Second, time.Millisecond, "the beat starts again")
	assert.LessOrEqual(t, b.beats.Load(), nb+1, "a released message gets one beat more at most")
	h.Release(c)
}

// Forget stops the beat of every message held, and says how many were.
func TestHeartbeatForgetsEveryMessage(t *testing.T) {
	const interval = 10 * time.Millisecond
	var h Heartbeat
	a, b := &progressMsg{}, &progressMsg{}
	h.Hold(a, interval)
	h.Hold(b, interval)
	require.Eventually(t, func() bool { return a.beats.Load() >= 1 && b.beats.Load() >= 1 }, 5*time.Second, time.Millisecond)

	assert.Equal(t, 2, h.Forget())
	na, nb := a.beats.Load(), b.beats.Load()
	c := &progressMsg{}
	h.Hold(c, interval)
	require.Eventually(t, func() bool { return c.beats.Load() >= 3 }, 5*time.Second, time.Millisecond, "the beat starts again")
	assert.LessOrEqual(t, a.beats.Load(), na+1, "a forgotten message gets one beat more at most")
	assert.LessOrEqual(t, b.beats.Load(), nb+1, "a forgotten message gets one beat more at most")
	assert.Equal(t, 1, h.Forget())
	assert.Zero(t, h.Forget())
}

// stalledMsg is a message whose first beat takes until stall is closed.
type stalledMsg struct {
	jetstream.Msg
	beats atomic.Int32
	stall chan struct{}
}

func (m *stalledMsg) InProgress() error {
	if m.beats.Add(1) == 1 {
		<-m.stall
	}
	return nil
}

// A beat slower than the interval delays the next one rather than running
// beside it: two beats under way at once would each reach a message
// released meanwhile (under load, TestHeartbeatBeatsHeldMessagesOnly saw
// one beat more than one).
func TestABeatUnderWayHasNoSecond(t *testing.T) {
	const interval = 5 * time.Millisecond
	var h Heartbeat
	a := &stalledMsg{stall: make(chan struct{})}
	h.Hold(a, interval)
	require.Eventually(t, func() bool { return a.beats.Load() == 1 }, 5*time.Second, time.Millisecond, "the first beat")
	assert.Never(t, func() bool { return a.beats.Load() > 1 }, 20*interval, time.Millisecond, "no beat beside the one under way")
	h.Release(a)
	b := &progressMsg{}
	h.Hold(b, interval) // held again while the beat is under way: no second beat either
	assert.Never(t, func() bool { return b.beats.Load() > 0 }, 20*interval, time.Millisecond, "no beat beside the one under way, for one held meanwhile")
	close(a.stall)
	require.Eventually(t, func() bool { return b.beats.Load() >= 2 }, 5*time.Second, time.Millisecond, "the beats go on after it")
	assert.Equal(t, int32(1), a.beats.Load(), "released during its beat, it has no other")
	h.Release(b)
}
