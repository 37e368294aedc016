package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
)

// TestEventPathPrintsEachHopAndMarksTheEvent prints a chain as kfn trace
// does: each event with how it came to be, each delivery with its outcome
// and attempts, the events that followed under the delivery they came
// from, the event asked for marked.
func TestEventPathPrintsEachHopAndMarksTheEvent(t *testing.T) {
	stored := time.Date(2026, 11, 28, 12, 0, 1, 0, time.Local)
	emitted := &eventpath.Event{Sequence: 6, ID: "e-2", Source: "shop", Type: "order.fulfilled.v1", Origin: eventpath.Emitted,
		Deliveries: []*eventpath.Delivery{{Namespace: "default", Subscription: "notify", Function: "default/notify", Outcome: dispatcher.DeadLettered,
			Reason: "the sink answered 500", Attempts: 2, Steps: []eventpath.Attempt{
				{Number: 1, Outcome: dispatcher.Failed, Status: 500, Duration: 3 * time.Millisecond},
				{Number: 2, Outcome: dispatcher.DeadLettered, Duration: time.Millisecond}}}}}
	chains := []eventpath.Chain{{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Events: []*eventpath.Event{{
		Sequence: 5, ID: "order-1", Source: "shop", Type: "order.created.v1", Stored: stored, Origin: eventpath.Published,
		Deliveries: []*eventpath.Delivery{{Namespace: "default", Subscription: "fulfil", Function: "default/fulfil", Outcome: dispatcher.Delivered,
			Attempts: 1, Steps: []eventpath.Attempt{{Number: 1, Outcome: dispatcher.Delivered, Status: 200, Duration: 12 * time.Millisecond}},
			Emitted: []*eventpath.Event{emitted}},
			{Namespace: "default", Subscription: "audit", Function: "default/audit", Steps: []eventpath.Attempt{}}},
		Replays: []*eventpath.Event{{Sequence: 9, ID: "order-1", Source: "shop", Type: "order.created.v1", Origin: eventpath.Replay}},
	}}}}
	var out strings.Builder
	require.NoError(t, printEventPath(&out, chains, "e-2", "", ""))
	assert.Equal(t, `chain of trace 4bf92f3577b34da6a3ce929d0e0e4736
  published order-1 (order.created.v1 from shop, stream sequence 5, stored 12:00:01.000)
    -> default/fulfil at default/fulfil: delivered after 1 attempt [#1 200 in 12ms]
      emitted e-2 (order.fulfilled.v1 from shop, stream sequence 6)  <- this event
        -> default/notify at default/notify: dead-lettered after 2 attempts [#1 500 in 3ms, #2 network error in 1ms]
          reason: the sink answered 500
    -> default/audit at default/audit: first attempt under way
    replay order-1 (order.created.v1 from shop, stream sequence 9)
      -> no Subscription took it
`, out.String())
}

// TestEventPathQuotesWhatAPublisherChose: an event's id, type or source
// with control characters (a terminal escape) is printed quoted, and a
// long one cut, so that printing a path cannot drive the terminal.
func TestEventPathQuotesWhatAPublisherChose(t *testing.T) {
	chains := []eventpath.Chain{{Events: []*eventpath.Event{{
		ID: "x\x1b[2J", Source: "shop\r\n", Type: strings.Repeat("é", 300), Origin: eventpath.Published,
	}}}}
	var out strings.Builder
	require.NoError(t, printEventPath(&out, chains, "x\x1b[2J", "", ""))
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\r")
	assert.Contains(t, out.String(), `published "x\x1b[2J" (`+strings.Repeat("é", 200)+`... from "shop\r\n")  <- this event`)
	assert.Contains(t, out.String(), "chain (no trace context)")
	assert.Contains(t, out.String(), "\n    -> no Subscription took it\n")
	assert.Equal(t, strings.Repeat("é", 200), printable(strings.Repeat("é", 200)), "200 characters are not cut")
}
