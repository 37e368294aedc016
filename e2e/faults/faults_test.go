package faults

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/testport"
)

// rate is the steady flow of every test, events per second.
const rate = 200

// run starts the platform and the flow, strikes with fault, stops the flow
// and checks that nothing was lost and that at most maxDuplicates answers
// were repeated; it returns what the function recorded.
func run(t *testing.T, maxDuplicates int, fault func(h *harness)) deliveries {
	if testing.Short() {
		t.Skip("runs an API server, NATS, the event bridge and a function as processes")
	}
	h := newHarness(t)
	stop := make(chan struct{})
	wait := h.flow(rate, stop)
	h.awaitPublished(rate) // a second of steady flow before the fault
	fault(h)
	h.awaitPublished(rate) // and one after
	close(stop)
	wait()
	return h.check(maxDuplicates)
}

// Each kill of the dispatcher cuts short at most the in-flight window:
// those events may have been answered but not acknowledged.
func TestDispatcherKilledTwice(t *testing.T) {
	run(t, 2*maxInFlight, func(h *harness) {
		for range 2 {
			h.dispatcher.kill(t)
			h.awaitPublished(rate / 2) // events pile up with no dispatcher
			h.startDispatcher()
			h.awaitPublished(rate / 2)
		}
	})
}

// Two dispatcher replicas serve the Subscription and share its events;
// one is killed (kill -9) and the other takes over the events it held once
// their ack wait (2 s) runs out. Only those, at most the in-flight window
// (maxInFlightMessages across both replicas), can be delivered twice.
func TestDispatcherReplicaKilled(t *testing.T) {
	run(t, maxInFlight, func(h *harness) {
		port := testport.Port(t)
		replica := h.startDispatcherReplica("dispatcher-2", port)
		h.await("the second replica serves its metrics", func() bool { return h.serving(port) })
		// In await's conditions: an error reads as no delivery yet.
		delivered := func(port int) int {
			n, err := h.counter(port, "kfn_eventbridge_delivered_total")
			if err != nil {
				return -1
			}
			return n
		}
		first, err := h.counter(h.dispatcherMetrics, "kfn_eventbridge_delivered_total")
		require.NoError(t, err)
		second := 0
		h.await("both replicas deliver", func() bool {
			second = delivered(port)
			return delivered(h.dispatcherMetrics) > first && second > 0
		})
		replica.kill(t)
		h.awaitPublished(rate / 2)
		h.await("the surviving replica delivers on", func() bool { return delivered(h.dispatcherMetrics) > first+rate/4 })
	})
}

// NATS killed with SIGKILL loses the acknowledgements on their way (at
// most the in-flight window) and those it had taken but not yet written to
// the consumer's state, which its file store writes at most every 100 ms:
// up to 100 ms of the flow more.
func TestNATSRestarted(t *testing.T) {
	run(t, maxInFlight+rate/10, func(h *harness) {
		h.nats.kill(t) // kill -9: what JetStream's file store keeps is what it acknowledged
		h.startNATS()
	})
}

// NATS stopped cleanly writes its state first: only the acknowledgements
// on their way are lost, at most the in-flight window.
func TestNATSStoppedCleanlyAndRestarted(t *testing.T) {
	run(t, maxInFlight, func(h *harness) {
		h.nats.stop(t) // SIGTERM, as a rolling update of NATS does
		h.awaitNoNATS()
		h.startNATS()
	})
}

// A killed function may have answered requests whose answers never left
// it: at most the in-flight window. Its endpoint stays ready until the
// kubelet would notice, so the dispatcher spends attempts on it meanwhile.
func TestFunctionKilled(t *testing.T) {
	run(t, maxInFlight, func(h *harness) {
		h.function.kill(t)
		h.awaitPublished(rate / 2)
		h.setReady(false)
		h.startFunction()
	})
}

// A scale-down to zero and back, in Kubernetes's order: the endpoint stops
// being ready, the dispatcher stops pulling, the host drains on SIGTERM.
// While the function is at zero the dispatcher waits without spending a
// single attempt, and since every call was answered before the host
// exited, nothing is delivered twice.
func TestFunctionAtZeroAndBack(t *testing.T) {
	run(t, 0, func(h *harness) {
		seen, err := h.notPulling()
		require.NoError(t, err)
		h.setReady(false)
		h.await("the dispatcher sees no ready endpoint and stops pulling", func() bool {
			n, err := h.notPulling()
			return err == nil && n > seen
		})
		h.function.stop(t) // SIGTERM: the host drains, as a scale-down does
		failed := h.failedAttempts()
		h.awaitPublished(rate)
		assert.Equal(t, failed, h.failedAttempts(), "attempts failed while the function was at zero")
		h.startFunction()
	})
}

// Every attempt while the function is slow times out and is abandoned by
// the dispatcher; each such event must be delivered again, and since an
// abandoned delivery is not an answer, nothing is answered twice.
func TestSlowFunctionThenFast(t *testing.T) {
	got := run(t, 0, func(h *harness) {
		// Slower than the dispatcher's request timeout (1 s): every
		// attempt times out and is retried.
		require.NoError(t, os.WriteFile(h.slow, nil, 0o644))
		h.awaitPublished(rate)
		require.NoError(t, os.Remove(h.slow))
	})
	require.NotEmpty(t, got.abandoned, "the slow function made the dispatcher give up on deliveries")
	for id := range got.abandoned {
		assert.NotZero(t, got.answered[id], "event %s, abandoned after the request timeout, was delivered again", id)
	}
}
