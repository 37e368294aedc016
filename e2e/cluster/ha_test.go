package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKilledStreamLeaderLosesNoEvent kills (SIGKILL, no grace) the NATS
// server that leads the event stream while events are published at a
// steady pace: the stream gets a leader again (one of the two others, or
// the killed one restarted in its pod), every event the publisher
// acknowledged reaches the function, and the test reports the longest
// time without an acknowledged publish, the publish p99 and the
// duplicates (at most natsFaultHeld: the events whose acknowledgement the
// killed server took with it). It needs the HA profile (3 NATS servers,
// R3 streams) and is skipped on the small one. A publish that fails is
// retried with the same id, as a producer does; JetStream's
// de-duplication stores it once.
func TestKilledStreamLeaderLosesNoEvent(t *testing.T) {
	requireHA(t)
	start := time.Now()
	ns, fn := faultSink(t, "leader")

	load := startLoad(t, ns)
	load.waitAcked(t, 100)
	leader := streamLeader(t, "kfn-events")
	require.NotEmpty(t, leader, "a server leads the event stream")
	killPod(t, leader)
	// The killed server is restarted in its pod within seconds, and may
	// lead the stream again: what counts is that events are stored again.
	load.waitAcked(t, load.count()+100)
	load.finish(t, fn, natsFaultHeld(t), fmt.Sprintf("killed stream leader %s (leader after: %s)", leader, streamLeader(t, "kfn-events")), start)
}
