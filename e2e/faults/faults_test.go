package faults

import (
	"os"
	"testing"
)

// rate is the steady flow of every test, events per second.
const rate = 200

// run starts the platform and the flow, strikes with fault, stops the flow
// and checks that nothing was lost.
func run(t *testing.T, fault func(h *harness)) {
	if testing.Short() {
		t.Skip("runs NATS, the event bridge and a function as processes")
	}
	h := newHarness(t)
	stop := make(chan struct{})
	wait := h.flow(rate, stop)
	h.awaitPublished(rate) // a second of steady flow before the fault
	fault(h)
	h.awaitPublished(rate) // and one after
	close(stop)
	wait()
	h.check()
}

func TestDispatcherKilledTwice(t *testing.T) {
	run(t, func(h *harness) {
		for range 2 {
			h.dispatcher.kill(t)
			h.awaitPublished(rate / 2) // events pile up with no dispatcher
			h.startDispatcher()
			h.awaitPublished(rate / 2)
		}
	})
}

func TestNATSRestarted(t *testing.T) {
	run(t, func(h *harness) {
		h.nats.kill(t) // kill -9: what JetStream's file store keeps is what it acknowledged
		h.startNATS()
	})
}

func TestNATSStoppedCleanlyAndRestarted(t *testing.T) {
	run(t, func(h *harness) {
		h.nats.stop(t) // SIGTERM, as a rolling update of NATS does
		h.awaitNoNATS()
		h.startNATS()
	})
}

func TestFunctionKilled(t *testing.T) {
	run(t, func(h *harness) {
		h.function.kill(t)
		h.awaitPublished(rate / 2)
		h.startFunction()
	})
}

func TestFunctionAtZeroAndBack(t *testing.T) {
	run(t, func(h *harness) {
		h.function.stop(t) // SIGTERM: the host drains, as a scale-down does
		h.awaitPublished(rate)
		h.startFunction()
	})
}

func TestSlowFunctionThenFast(t *testing.T) {
	run(t, func(h *harness) {
		// Slower than the dispatcher's request timeout (1 s): every
		// attempt times out and is retried.
		if err := os.WriteFile(h.slow, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		h.awaitPublished(rate)
		if err := os.Remove(h.slow); err != nil {
			t.Fatal(err)
		}
	})
}
