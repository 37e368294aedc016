package cluster

import (
	"testing"
	"time"
)

// TestKilledDispatcherAndNATSLoseNoEvent publishes a steady stream of
// events while every event bridge pod (publisher and dispatcher) and then
// every NATS server is killed (SIGKILL to their processes on the node;
// the kubelet restarts them): every event the publisher acknowledged
// reaches the function. A publish that fails (the
// publisher is down) is retried with the same id, as a producer does;
// JetStream's de-duplication stores it once.
func TestKilledDispatcherAndNATSLoseNoEvent(t *testing.T) {
	start := time.Now()
	ns, fn := faultSink(t, "faults")
	load := startLoad(t, ns)
	load.waitAcked(t, 50)
	kill(t, "app.kubernetes.io/component=eventbridge")
	load.waitAcked(t, load.count()+50)
	kill(t, "app.kubernetes.io/component=nats")
	load.waitAcked(t, load.count()+50)
	// Two faults, each may take the acknowledgements of the events in
	// flight with it.
	load.finish(t, fn, 2*natsFaultHeld(t), "killed every event bridge, then every NATS server", start)
}
