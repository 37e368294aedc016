package dispatcher

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

// Every held event is beaten every interval until it is released; the
// beat stops when none is held and starts again with the next.
func TestHeartbeatBeatsHeldEventsOnly(t *testing.T) {
	const interval = 20 * time.Millisecond
	var h heartbeat
	a, b := &progressMsg{}, &progressMsg{}
	h.hold(a, interval)
	h.hold(b, interval)
	require.Eventually(t, func() bool { return a.beats.Load() >= 3 && b.beats.Load() >= 3 }, 5*time.Second, time.Millisecond)

	h.release(a)
	n := a.beats.Load()
	require.Eventually(t, func() bool { return b.beats.Load() >= n+3 }, 5*time.Second, time.Millisecond)
	assert.LessOrEqual(t, a.beats.Load(), n+1, "a released event gets one beat more at most")

	h.release(b)
	h.mu.Lock()
	stopped := len(h.events) == 0
	h.mu.Unlock()
	assert.True(t, stopped)
	nb := b.beats.Load()
	time.Sleep(5 * interval) // nothing to await: no beat may come
	assert.LessOrEqual(t, b.beats.Load(), nb+1)

	c := &progressMsg{}
	h.hold(c, interval)
	require.Eventually(t, func() bool { return c.beats.Load() >= 2 }, 5*time.Second, time.Millisecond)
	h.release(c)
}
