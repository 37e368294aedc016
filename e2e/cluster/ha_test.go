package cluster

import (
	"fmt"
	"testing"
	"time"
)

// TestKilledStreamLeaderLosesNoEvent kills (SIGKILL, no grace) the NATS
// server that leads the event stream while events are published at a
// steady pace: the two other servers elect a new leader, every event the
// publisher acknowledged reaches the function, and the test reports the
// longest time without an acknowledged publish, the publish p99 and the
// duplicates (at most faultInFlight: the events whose acknowledgement the
// killed server took with it). It needs the HA profile (3 NATS servers, R3 streams) and is
// skipped on the small one. A publish that fails is retried with the same
// id, as a producer does; JetStream's de-duplication stores it once.
func TestKilledStreamLeaderLosesNoEvent(t *testing.T) {
	requireHA(t)
	start := time.Now()
	ns, fn := faultSink(t, "leader")

	load := startLoad(t, ns)
	load.waitAcked(t, 100)
	leader := streamLeader(t, "kfn-events")
	killPod(t, leader)
	eventually(t, 3*time.Minute, "another server leads the event stream", func() error {
		if l := streamLeader(t, "kfn-events"); l == leader || l == "" {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	load.waitAcked(t, load.count()+100)
	load.finish(t, fn, faultInFlight, fmt.Sprintf("killed stream leader %s (new leader %s)", leader, streamLeader(t, "kfn-events")), start)
}
