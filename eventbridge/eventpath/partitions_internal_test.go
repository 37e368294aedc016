package eventpath

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// TestEventsOfTwoPartitionsAreTwoEvents: two events of one sequence in two
// partitions' streams are two events, each with its deliveries; an event
// emitted in one partition while an event of another is delivered is
// linked under that delivery, and the reply of a sink, stored in another
// partition, under its delivery.
func TestEventsOfTwoPartitionsAreTwoEvents(t *testing.T) {
	r, err := New(0)
	require.NoError(t, err)
	now := time.Now()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	order := dispatcher.EventRef{ID: "order-1", Source: "shop", Type: "order.created.v1"}
	other := dispatcher.EventRef{ID: "order-2", Source: "shop", Type: "order.created.v1"}
	reply := dispatcher.EventRef{ID: "reply-1", Source: "fulfil", Type: "order.fulfilled.v1"}
	r.stored(eventKey{"kfn-events-2", 7}, now, "kyma.shop.order.created.v1", order, "")
	r.stored(eventKey{"kfn-events", 7}, now, "kyma.shop.order.created.v1", other, "")
	r.Observe(dispatcher.Step{Namespace: "default", Subscription: "fulfil", SinkNamespace: "default", SinkService: "fulfil",
		Event: order, Sequence: 7, Stream: "kfn-events-2", TraceParent: tp, Attempt: 1, Outcome: dispatcher.Delivered, Status: 200, At: now,
		Reply: &reply})
	r.stored(eventKey{"kfn-events", 3}, now, "kyma.fulfil.order.fulfilled.v1", reply, "") // a lower sequence, another stream

	chains := r.Chains(0)
	require.Len(t, chains, 2, "one sequence, two streams: two events")
	byID := map[string]*Event{}
	for _, c := range chains {
		require.Len(t, c.Events, 1)
		byID[c.Events[0].ID] = c.Events[0]
	}
	require.Contains(t, byID, "order-1")
	first := byID["order-1"]
	assert.Equal(t, "kfn-events-2", first.Stream)
	require.Len(t, first.Deliveries, 1, "the delivery is order-1's, not order-2's")
	require.Len(t, first.Deliveries[0].Emitted, 1, "the reply, stored in partition 0 after the delivery, under it")
	assert.Equal(t, "reply-1", first.Deliveries[0].Emitted[0].ID)
	assert.Empty(t, byID["order-2"].Deliveries)
}
