package cluster

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/test/node/install"
)

// The faults of the chart's profile ha (issue 33): each under the steady
// publish load of faultload_test.go, each requiring that every
// acknowledged event is delivered with at most faultInFlight duplicates
// per killed pod (natsFaultHeld per NATS server: one per partition, up to
// the event bridge replicas), each logging the publish p99 and the longest publish
// outage. Every kill is SIGKILL to the pod's processes on the node (crash);
// where the fault must last, the node is cordoned first and the killed pod
// removed, so that its replacement waits.

const (
	natsSelector        = "app.kubernetes.io/component=nats"
	eventBridgeSelector = "app.kubernetes.io/component=eventbridge"
	controllerSelector  = "app.kubernetes.io/component=controller"
	scalerSelector      = "app.kubernetes.io/component=scaler"
)

// TestKilledNATSFollowerLosesNoEvent kills a NATS server that does not
// lead the event stream: the stream keeps its leader and its quorum, the
// components connected to the killed server reconnect to another, and
// nothing acknowledged is lost.
func TestKilledNATSFollowerLosesNoEvent(t *testing.T) {
	requireHA(t)
	start := time.Now()
	ns, fn := faultSink(t, "follower")
	load := startLoad(t, ns)
	load.waitAcked(t, 100)

	leader := streamLeader(t, "kfn-events")
	require.NotEmpty(t, leader, "a server leads the event stream")
	var follower string
	for _, p := range podsOf(t, natsSelector) {
		if p.Name != leader {
			follower = p.Name
			break
		}
	}
	require.NotEmpty(t, follower)
	killPod(t, follower)
	load.waitAcked(t, load.count()+100)
	load.finish(t, fn, natsFaultHeld(t), fmt.Sprintf("killed NATS follower %s (stream leader %s, after: %s)", follower, leader, streamLeader(t, "kfn-events")), start)
}

// TestNATSQuorumLossAnswers503AndRecovers kills two of the three NATS
// servers in turn, their replacements held back: after the first, the
// two left keep storing; after the second, the event stream has no quorum
// and every publish is answered 503 (within the publisher's store timeout,
// never held longer, never another status), until the servers come back
// and the stream recovers by itself. Nothing acknowledged is lost.
func TestNATSQuorumLossAnswers503AndRecovers(t *testing.T) {
	requireHA(t)
	start := time.Now()
	ns, fn := faultSink(t, "quorum")
	load := startLoad(t, ns)
	load.waitAcked(t, 100)

	release := holdReplacements(t)
	first := streamLeader(t, "kfn-events")
	require.NotEmpty(t, first, "a server leads the event stream")
	killed := map[string]types.UID{first: killAndRemove(t, first)}
	eventually(t, 3*time.Minute, "the two servers left elect a leader", func() error {
		if l := streamLeader(t, "kfn-events"); l == first || l == "" {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	load.waitAcked(t, load.count()+100)
	t.Logf("one server down: the two left store events (leader %s)", streamLeader(t, "kfn-events"))

	second := streamLeader(t, "kfn-events")
	lostAt := time.Now()
	killed[second] = killAndRemove(t, second)
	// The quorum is lost: the publish attempts are answered 503, each
	// within the store timeout (and the time the publisher takes to
	// answer, a few seconds at most on the shared node).
	refusedBound := publisher.DefaultStoreTimeout + 5*time.Second
	var refused []attempt
	eventually(t, 2*time.Minute, "publishes refused with 503 while the quorum is lost", func() error {
		refused = refused[:0]
		for _, a := range load.failures() {
			if a.at.After(lostAt) && a.code == http.StatusServiceUnavailable {
				refused = append(refused, a)
			}
		}
		if len(refused) < 5 {
			return fmt.Errorf("%d publishes answered 503", len(refused))
		}
		return nil
	})
	// From the first refusal on, the one server left stores nothing.
	firstRefused := refused[0].at.Add(refused[0].took)
	releasedAt := time.Now()
	ackedAlone := load.ackedBetween(firstRefused, releasedAt)
	release()
	for name, uid := range killed {
		waitReplaced(t, name, uid)
	}
	load.waitAcked(t, load.count()+100)

	r := load.finish(t, fn, 2*natsFaultHeld(t), fmt.Sprintf("killed NATS servers %s then %s (leader after both came back: %s)",
		first, second, streamLeader(t, "kfn-events")), start)
	// Every attempt from the second kill until the servers came back was
	// answered 503 in bounded time: none hung, none got another status.
	var slowest time.Duration
	var other []string
	for _, a := range r.failed {
		if !a.at.After(lostAt) {
			continue
		}
		slowest = max(slowest, a.took)
		if a.code != http.StatusServiceUnavailable {
			other = append(other, fmt.Sprintf("%d %v after %s", a.code, a.err, a.took.Round(time.Millisecond)))
		}
	}
	t.Logf("without quorum: the first 503 %s after the second kill; %d publishes answered 503 in the %s held, the slowest refused attempt took %s; %d acknowledged from the first 503 until the servers came back; publishing acknowledged again %s after they were let back",
		firstRefused.Sub(lostAt).Round(time.Millisecond), len(refused), releasedAt.Sub(lostAt).Round(time.Second), slowest.Round(time.Millisecond), ackedAlone, recoveredAfter(r, releasedAt).Round(time.Millisecond))
	assert.LessOrEqual(t, slowest, refusedBound, "a refused publish is answered within the store timeout")
	assert.Empty(t, other, "publishes not acknowledged are answered 503, nothing else")
	assert.Zero(t, ackedAlone, "no publish is acknowledged by one server of three")
}

// recoveredAfter is the time from t0 to the first acknowledged publish
// after it.
func recoveredAfter(r loadResult, t0 time.Time) time.Duration {
	for _, at := range r.ackedAt {
		if at.After(t0) {
			return at.Sub(t0)
		}
	}
	return -1
}

// TestKilledEventBridgeReplicaKeepsDelivering kills one of the two event
// bridge replicas (publisher and dispatcher) and holds its replacement
// back: the other replica publishes and delivers alone (kube-proxy sends
// the publisher Service's requests to it, and it consumes every
// Subscription's consumer, which both replicas pull from), and the events
// the killed replica had taken but not settled are delivered again after
// JetStream's ack wait (stream.DefaultAckWait): at most faultInFlight
// duplicates.
func TestKilledEventBridgeReplicaKeepsDelivering(t *testing.T) {
	start := time.Now()
	bridges := podsOf(t, eventBridgeSelector)
	if len(bridges) < 2 {
		t.Skipf("needs 2 event bridge replicas (the chart's profile ha); the install runs %d (%s)", len(bridges), install.ProfileEnv)
	}
	ns, fn := faultSink(t, "bridge")
	load := startLoad(t, ns)
	load.waitAcked(t, 100)

	release := holdReplacements(t)
	victim := bridges[0]
	killAndRemove(t, victim.Name)
	// Alone: the survivor stores and delivers the next 100 events.
	from := load.count()
	load.waitAcked(t, from+100)
	alone := load.stop()
	require.NoError(t, platform.recorder.waitAll(t.Context(), fn, alone.acked[from:], 3*time.Minute), "delivered by the replica left")
	left := podsOf(t, eventBridgeSelector)
	ready := 0
	for _, p := range left {
		if podReady(&p) {
			ready++
		}
	}
	require.Equal(t, 1, ready, "one event bridge replica was running while those events were published and delivered")
	release()
	waitReadyPods(t, eventBridgeSelector, 2, map[types.UID]bool{victim.UID: true})

	// The accounting: the run as a whole, every event acknowledged before
	// or after the kill delivered (those the killed replica held, after
	// the ack wait).
	dups := 0
	require.NoError(t, platform.recorder.waitAll(t.Context(), fn, alone.acked, 5*time.Minute))
	for _, n := range platform.recorder.counts(fn) {
		dups += n - 1
	}
	codes := map[int]int{}
	for _, a := range alone.failed {
		codes[a.code]++
	}
	t.Logf("killed event bridge %s, its replacement held back: %d events acknowledged, all delivered (the last 100 by the replica left alone); failed publish attempts by status (0: no answer) %v; longest publish outage %s; publish p99 %s; %d duplicate deliveries (bound %d); scenario took %s",
		victim.Name, len(alone.acked), codes, alone.outage.Round(time.Millisecond), alone.p99.Round(time.Millisecond), dups, faultInFlight, time.Since(start).Round(time.Second))
	require.LessOrEqual(t, dups, faultInFlight, "duplicate deliveries")
}

// answerFunction is a Node.js Function that answers text.
func answerFunction(name, text string) string {
	return inlineFunction(name, "nodejs22", nil, fmt.Sprintf(`
module.exports = { main: async function () { return %q; } }
`, text))
}

// controllerLease is the controller's leader election Lease
// (controller.LeaderElectionID; the controller package itself is not
// imported here, it would bring KEDA's API into this module).
const controllerLease = "kfn-function-controller"

// controllerConvergeBound bounds how long Functions created and updated
// while the controller leader is killed take to run: the Lease's 15 s
// duration (the killed leader does not release it) before a replica takes
// over, then the rollouts on a shared 2-core node.
const controllerConvergeBound = 3 * time.Minute

// TestKilledControllerLeaderConverges kills the controller replica that
// holds the leader Lease while Functions are created and updated: once
// the Lease expires, the other replica or the killed one, restarted by
// the kubelet with a new identity, takes it over, and every Function
// runs its latest generation (answering its latest source) within
// controllerConvergeBound; the time measured is logged.
func TestKilledControllerLeaderConverges(t *testing.T) {
	controllers := podsOf(t, controllerSelector)
	if len(controllers) < 2 {
		t.Skipf("needs 2 controller replicas (the chart's profile ha); the install runs %d (%s)", len(controllers), install.ProfileEnv)
	}
	start := time.Now()
	ns, fn := faultSink(t, "leaderctl")
	apply(t, ns, answerFunction("old-a", "a1"))
	apply(t, ns, answerFunction("old-b", "b1"))
	waitRunning(t, ns, "old-a", 3*time.Minute)
	waitRunning(t, ns, "old-b", 3*time.Minute)
	load := startLoad(t, ns)
	load.waitAcked(t, 100)

	identity, leader := leaseHolder(t, controllerLease)
	require.NotEmpty(t, leader, "a controller holds the Lease")
	killedAt := time.Now()
	before := crash(t, leader)
	apply(t, ns, answerFunction("old-a", "a2"))
	apply(t, ns, answerFunction("new-c", "c1"))
	apply(t, ns, answerFunction("old-b", "b2"))
	want := map[string]string{"old-a": "a2", "old-b": "b2", "new-c": "c1"}
	names := slices.Sorted(maps.Keys(want))
	for _, name := range names {
		waitRunning(t, ns, name, controllerConvergeBound-time.Since(killedAt))
		waitAnswer(t, functionURL(t, ns, name), want[name])
	}
	converged := time.Since(killedAt)
	newIdentity, _ := leaseHolder(t, controllerLease)
	waitRestarted(t, before)
	load.waitAcked(t, load.count()+50)
	load.finish(t, fn, 0, fmt.Sprintf("killed controller leader %s (Lease held by %s, now by %s): 1 Function created and 2 updated after the kill all Running and answering their new source %s after it",
		leader, identity, newIdentity, converged.Round(time.Second)), start)
	assert.NotEqual(t, identity, newIdentity, "another process holds the Lease (the other replica, or the killed one restarted)")
}

// TestKilledActiveScalerStillWakes kills and removes the scaler replica
// that KEDA is connected to (found from KEDA's operator's TCP connections
// to the scaler's gRPC port, read in its network namespace on the node)
// while a Function waits at zero: an event published at once still wakes
// it and is delivered, KEDA having reconnected to a live replica (the
// other, or the killed one's replacement when it is up first; the log
// says which).
func TestKilledActiveScalerStillWakes(t *testing.T) {
	scalers := podsOf(t, scalerSelector)
	if len(scalers) < 2 {
		t.Skipf("needs 2 scaler replicas (the chart's profile ha); the install runs %d (%s)", len(scalers), install.ProfileEnv)
	}
	start := time.Now()
	ns, fn := faultSink(t, "scaler")
	apply(t, ns, scalingFunction("wake", 0, 1, 15, 10, 0))
	apply(t, ns, subscription(ns, "wake", "wake", "order.wake.v1", nil))
	waitSubscriptionReady(t, ns, "wake")
	waitAtZero(t, ns, "wake", 3*time.Minute)
	load := startLoad(t, ns)
	load.waitAcked(t, 100)

	port := scalers[0].Spec.Containers[0].Ports[0].ContainerPort
	active := activeScaler(t, int(port))
	require.NotNil(t, active, "KEDA is connected to a scaler replica")
	killedAt := time.Now()
	killAndRemove(t, active.Name)
	id := ns + "-wake"
	publish(t, "order.wake.v1", "shop", id, `{}`)
	require.NoError(t, platform.recorder.waitAll(t.Context(), "wake", []string{id}, 3*time.Minute), "the event published after the kill wakes the Function")
	woke := time.Since(killedAt)
	now := "none yet"
	if p := activeScaler(t, int(port)); p != nil {
		now = p.Name + ", the killed one's replacement"
		for _, s := range scalers {
			if s.UID == p.UID {
				now = p.Name + ", the other replica"
			}
		}
	}
	load.waitAcked(t, load.count()+50)
	load.finish(t, fn, 0, fmt.Sprintf("killed the scaler KEDA was connected to, %s, with a Function at zero (KEDA connected to %s after): the event published at once woke it and was delivered %s after the kill",
		active.Name, now, woke.Round(time.Millisecond)), start)
}

// activeScaler returns the scaler pod that KEDA's operator holds a
// connection to on port, nil when none.
func activeScaler(t *testing.T, port int) *corev1.Pod {
	t.Helper()
	keda, err := platform.cluster.Clientset.CoreV1().Pods(install.KEDANamespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	peers := map[string]bool{}
	for i := range keda.Items {
		if p := &keda.Items[i]; strings.HasPrefix(p.Name, "keda-operator-") && p.DeletionTimestamp == nil && p.Status.Phase == "Running" {
			for ip := range connectedPeers(t, p, port) {
				peers[ip] = true
			}
		}
	}
	for _, p := range podsOf(t, scalerSelector) {
		if peers[p.Status.PodIP] {
			return &p
		}
	}
	return nil
}
