package faults_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rate is the steady publish rate of every scenario, events per second.
const rate = 200

// TestDispatcherKilledTwice: the dispatcher, its own process, is killed
// with SIGKILL twice mid-stream and started again each time.
func TestDispatcherKilledTwice(t *testing.T) {
	s := newScenario(t, 1)
	d := s.startDispatcherProcess()
	l := startLoad(t, s.pubURL, rate)
	for range 2 {
		s.waitDelivered(300)
		d.signal(t, syscall.SIGKILL)
		t.Logf("killed the dispatcher with %d delivered, %d published", s.svc.count(), l.ackedCount())
		d = s.startDispatcherProcess()
	}
	s.waitDelivered(300)
	s.verify(l)
}

// TestNATSRestarted: the NATS server, its own process with file storage,
// is stopped cleanly and started again, then killed with SIGKILL and
// started again, while events flow; the publisher and the dispatcher (its
// own process) reconnect.
func TestNATSRestarted(t *testing.T) {
	s := newScenario(t, 1)
	s.startDispatcherProcess()
	l := startLoad(t, s.pubURL, rate)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		s.waitDelivered(300)
		s.nats.restart(t, sig)
		t.Logf("restarted NATS after %s with %d delivered, %d published", sig, s.svc.count(), l.ackedCount())
	}
	s.waitDelivered(300)
	s.verify(l)
}

// TestFunctionProcessesKilled: the function's processes are killed with
// SIGKILL, one of two, then both at once; the supervisor restarts them.
func TestFunctionProcessesKilled(t *testing.T) {
	s := newScenario(t, 2)
	s.startDispatcher(2 * time.Second)
	l := startLoad(t, s.pubURL, rate)
	s.waitDelivered(300)
	pids := s.fn.pool.PIDs()
	require.Len(t, pids, 2)
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	s.waitDelivered(300)
	for _, pid := range s.fn.pool.PIDs() {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	t.Logf("killed every function process with %d delivered, %d published", s.svc.count(), l.ackedCount())
	s.waitDelivered(300)
	s.verify(l)
}

// TestScaleToZeroAndBack: the function scales to zero while events keep
// coming; they wait in the stream without spending attempts, and are
// delivered once it is back.
func TestScaleToZeroAndBack(t *testing.T) {
	s := newScenario(t, 1)
	s.startDispatcher(2 * time.Second)
	l := startLoad(t, s.pubURL, rate)
	ctx := context.Background()
	for range 2 {
		s.waitDelivered(300)
		require.NoError(t, s.fn.pool.Scale(ctx, 0))
		s.waitPublished(l, 300)
		t.Logf("at zero: %d delivered, %d published", s.svc.count(), l.ackedCount())
		require.NoError(t, s.fn.pool.Scale(ctx, 1))
	}
	s.waitDelivered(300)
	s.verify(l)
}

// TestSlowSinkThenFast: the function becomes slower than the dispatcher's
// request timeout, so deliveries time out and are retried, then fast again.
func TestSlowSinkThenFast(t *testing.T) {
	s := newScenario(t, 1)
	s.startDispatcher(time.Second)
	l := startLoad(t, s.pubURL, rate)
	s.waitDelivered(300)
	s.fn.setSlow(t, true)
	require.Eventually(t, func() bool { return s.svc.failures("dispatcher gave up (timeout)") >= 64 },
		deliverBound, tick, "deliveries time out")
	s.fn.setSlow(t, false)
	t.Logf("fast again with %d delivered, %d published", s.svc.count(), l.ackedCount())
	s.waitDelivered(300)
	s.verify(l)
}
