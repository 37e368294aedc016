package eventpath_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// namespacesEnv is an event stream on a real NATS server and a Namespaces
// following it; store puts an event in the stream as the publisher does
// for a sender of namespace sender ("" without sender identity), and
// returns its stream sequence.
func namespacesEnv(t *testing.T, perNamespace, namespaces int) (*eventpath.Namespaces, func(sender, id string) uint64) {
	t.Helper()
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	n, err := eventpath.NewNamespaces(perNamespace, namespaces)
	require.NoError(t, err)
	stop, err := n.Follow(context.Background(), js, sc.EventStream)
	require.NoError(t, err)
	t.Cleanup(stop)
	store := func(sender, id string) uint64 {
		t.Helper()
		m := nats.NewMsg("kyma.shop.order.created.v1")
		m.Header.Set(eventstore.HeaderPrefix+"id", id)
		m.Header.Set(eventstore.HeaderPrefix+"source", "shop")
		m.Header.Set(eventstore.HeaderPrefix+"type", "order.created.v1")
		if sender != "" {
			m.Header.Set(eventstore.HeaderPrefix+eventstore.SenderExtension, sender)
		}
		ack, err := js.PublishMsg(context.Background(), m)
		require.NoError(t, err)
		return ack.Sequence
	}
	return n, store
}

// delivered tells n that the event of seq and id reached Subscription
// namespace/name.
func delivered(n *eventpath.Namespaces, namespace, name string, seq uint64, id string) {
	n.Observe(step(namespace, name, seq, id))
}

// step is the delivery of the event of seq and id to Subscription
// namespace/name at the first attempt.
func step(namespace, name string, seq uint64, id string) dispatcher.Step {
	return dispatcher.Step{Namespace: namespace, Subscription: name, SinkNamespace: namespace, SinkService: name,
		Event: dispatcher.EventRef{ID: id, Source: "shop", Type: "order.created.v1"}, Sequence: seq, Stream: stream.DefaultEventStream,
		Attempt: 1, Outcome: dispatcher.Delivered, Status: 200, At: time.Now()}
}

// deliveriesOf returns the namespace/name of the deliveries of the one
// event of id in chains.
func deliveriesOf(t *testing.T, chains []eventpath.Chain, id string) []string {
	t.Helper()
	require.Len(t, chains, 1)
	require.Len(t, chains[0].Events, 1)
	e := chains[0].Events[0]
	require.Equal(t, id, e.ID)
	var out []string
	for _, d := range e.Deliveries {
		out = append(out, d.Namespace+"/"+d.Subscription)
	}
	return out
}

// TestEachNamespaceSeesItsOwnPart: an event team-a sent reaches a
// Subscription of team-a and one of team-b. Each namespace's record shows
// the event with its own delivery only (who else subscribes is another
// tenant's business), a namespace it never reached has no record of it,
// and one namespace's flood of events does not push another's out.
func TestEachNamespaceSeesItsOwnPart(t *testing.T) {
	n, store := namespacesEnv(t, 10, 0)
	seq := store("team-a", "order-1")
	require.Eventually(t, func() bool { return len(n.Find(context.Background(), "team-a", "order-1", "")) == 1 }, 5*time.Second, 10*time.Millisecond,
		"stored: in its sender's record")
	delivered(n, "team-a", "audit", seq, "order-1")
	delivered(n, "team-b", "billing", seq, "order-1")
	assert.Equal(t, []string{"team-a/audit"}, deliveriesOf(t, n.Find(context.Background(), "team-a", "order-1", ""), "order-1"))
	assert.Equal(t, []string{"team-b/billing"}, deliveriesOf(t, n.Find(context.Background(), "team-b", "order-1", "shop"), "order-1"))
	assert.Empty(t, n.Find(context.Background(), "team-c", "order-1", ""), "never reached team-c")

	anonymous := store("", "no-sender")
	delivered(n, "team-b", "billing", anonymous, "no-sender")
	assert.Equal(t, []string{"team-b/billing"}, deliveriesOf(t, n.Find(context.Background(), "team-b", "no-sender", ""), "no-sender"),
		"without sender identity: recorded where it is delivered")
	assert.Empty(t, n.Find(context.Background(), "team-a", "no-sender", ""))

	var last uint64
	for i := range 30 {
		last = store("noisy", "flood-"+strconv.Itoa(i))
	}
	require.Eventually(t, func() bool { return len(n.Find(context.Background(), "noisy", "flood-29", "")) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Empty(t, n.Find(context.Background(), "noisy", "flood-0", ""), "the noisy namespace keeps its 10 most recent")
	assert.Positive(t, last)
	assert.Len(t, n.Find(context.Background(), "team-a", "order-1", ""), 1, "another namespace's record is its own")
	assert.Len(t, n.Find(context.Background(), "team-b", "order-1", ""), 1)
}

// TestNamespacesAreBounded: past the namespaces it keeps, the one least
// recently recorded is forgotten; negative bounds are refused.
func TestNamespacesAreBounded(t *testing.T) {
	n, store := namespacesEnv(t, 10, 2)
	store("one", "e1")
	require.Eventually(t, func() bool { return len(n.Find(context.Background(), "one", "e1", "")) == 1 }, 5*time.Second, 10*time.Millisecond)
	store("two", "e2")
	require.Eventually(t, func() bool { return len(n.Find(context.Background(), "two", "e2", "")) == 1 }, 5*time.Second, 10*time.Millisecond)
	store("three", "e3")
	require.Eventually(t, func() bool { return len(n.Find(context.Background(), "three", "e3", "")) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Empty(t, n.Find(context.Background(), "one", "e1", ""), "the least recently recorded namespace gave way")
	assert.Len(t, n.Find(context.Background(), "two", "e2", ""), 1)
	assert.Equal(t, 10, n.Bound())

	_, err := eventpath.NewNamespaces(-1, 0)
	require.Error(t, err)
	_, err = eventpath.NewNamespaces(0, -1)
	require.Error(t, err)
}
