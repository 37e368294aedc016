package eventpath_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/test/natstest"
)

// startReplica is one event bridge replica's record (perNamespace events
// a namespace) and its Replicas on a connection of its own to srv,
// answering the others until the test ends.
func startReplica(t *testing.T, srv *natstest.Server, perNamespace int) (*eventpath.Namespaces, *eventpath.Replicas) {
	t.Helper()
	n, err := eventpath.NewNamespaces(perNamespace, 0)
	require.NoError(t, err)
	r, err := eventpath.NewReplicas(n, srv.Connect(), "", nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan error, 1)
	go func() { running <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-running) })
	return n, r
}

// TestEveryReplicaAnswersEveryDelivery: two event bridge replicas, each
// delivering some of an event's deliveries (and its retries) of one
// namespace; a caller reaches one of them. It asks the other for its
// record of the namespace and merges it with its own, so either answers
// the whole path, the attempt the other made included. An answer that is
// not a replica's (deliveries of another namespace) is dropped.
func TestEveryReplicaAnswersEveryDelivery(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	na, ra := startReplica(t, srv, 10)
	nb, rb := startReplica(t, srv, 10)

	// Replica a: the first attempt to audit failed, billing delivered;
	// replica b (audit's event redelivered to it): the second attempt.
	first := step("team-a", "audit", 1, "order-1")
	first.Outcome, first.Status = dispatcher.Failed, 503
	na.Observe(first)
	na.Observe(step("team-a", "billing", 1, "order-1"))
	second := step("team-a", "audit", 1, "order-1")
	second.Attempt, second.At = 2, first.At.Add(time.Second)
	nb.Observe(second)
	nb.Observe(step("team-a", "audit", 2, "order-2"))

	for name, r := range map[string]*eventpath.Replicas{"a": ra, "b": rb} {
		var chains []eventpath.Chain
		require.Eventually(t, func() bool {
			chains = r.Find(ctx, "team-a", "order-1", "")
			return len(chains) == 1 && len(chains[0].Events[0].Deliveries) == 2 && chains[0].Events[0].Deliveries[0].Attempts == 2
		}, 5*time.Second, 10*time.Millisecond, "replica %s answers both deliveries, each attempt", name)
		audit := chains[0].Events[0].Deliveries[0]
		assert.Equal(t, "audit", audit.Subscription)
		assert.Equal(t, dispatcher.Delivered, audit.Outcome, "replica %s: the attempt made last, by whichever replica", name)
		if assert.Len(t, audit.Steps, 2, "replica %s: both attempts", name) {
			assert.Equal(t, 503, audit.Steps[0].Status)
			assert.Equal(t, 200, audit.Steps[1].Status)
		}
		assert.Len(t, r.Find(ctx, "team-a", "order-2", ""), 1, "replica %s: what only b recorded", name)
		assert.Empty(t, r.Find(ctx, "team-b", "order-1", ""), "another namespace's record has none of it")
	}

	// Another client of the subject answering with another namespace's
	// deliveries is dropped.
	liar := srv.Connect()
	_, err := liar.Subscribe(eventpath.DefaultAskSubject, func(m *nats.Msg) {
		_ = m.Respond([]byte(`[{"seq": 7, "id": "forged", "source": "shop", "deliveries": [{"namespace": "team-b", "subscription": "x", "updated": "2026-01-01T00:00:00Z"}]}]`))
	})
	require.NoError(t, err)
	require.NoError(t, liar.Flush())
	assert.Empty(t, ra.Find(ctx, "team-a", "forged", ""))
	assert.Len(t, ra.Find(ctx, "team-a", "order-2", ""), 1, "the true replica's answer still counts")
}

// TestReplicasJoinOneTraceAndBoundTheirAnswers: replica a stored an event
// (its publisher took it) and replica b delivered the event a function
// emitted for it (the same trace): either answers them as one chain. A
// replica's record larger than an answer may be is cut to its newest
// events, and an answer with more attempts to a delivery than a record
// keeps is dropped.
func TestReplicasJoinOneTraceAndBoundTheirAnswers(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	na, ra := startReplica(t, srv, 10)
	nb, _ := startReplica(t, srv, 2000)

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent := step("team-a", "fulfil", 1, "order-1")
	parent.TraceParent = "00-" + trace + "-00f067aa0ba902b7-01"
	na.Observe(parent)
	emitted := step("team-a", "notify", 2, "order-1-next")
	emitted.TraceParent = "00-" + trace + "-b7ad6b7169203331-01"
	nb.Observe(emitted)
	var chains []eventpath.Chain
	require.Eventually(t, func() bool {
		chains = ra.Find(ctx, "team-a", "order-1-next", "")
		return len(chains) == 1 && len(chains[0].Events) == 2
	}, 5*time.Second, 10*time.Millisecond, "one chain of the trace, from both replicas")
	assert.Equal(t, trace, chains[0].TraceID)

	// b's record of team-b: 2,000 events of 1 KiB ids, more than an answer.
	id := func(i int) string { return strings.Repeat("x", 1000) + strconv.Itoa(i) }
	for i := range 2000 {
		nb.Observe(step("team-b", "audit", uint64(100+i), id(i)))
	}
	assert.Len(t, ra.Find(ctx, "team-b", id(1999), ""), 1, "the newest are answered")
	assert.Empty(t, ra.Find(ctx, "team-b", id(0), ""), "the oldest are cut from an answer past its bound")

	liar := srv.Connect()
	steps := strings.Repeat(`{"number": 1, "outcome": "failed", "duration": 0, "at": "2026-01-01T00:00:00Z"},`, 11)
	_, err := liar.Subscribe(eventpath.DefaultAskSubject, func(m *nats.Msg) {
		_ = m.Respond([]byte(`[{"seq": 7, "id": "forged", "source": "shop", "deliveries": [{"namespace": "team-c", "subscription": "x", "steps": [` +
			strings.TrimSuffix(steps, ",") + `], "updated": "2026-01-01T00:00:00Z"}]}]`))
	})
	require.NoError(t, err)
	require.NoError(t, liar.Flush())
	assert.Empty(t, ra.Find(ctx, "team-c", "forged", ""), "more attempts than a record keeps")
}
