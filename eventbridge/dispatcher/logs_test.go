package dispatcher_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/test/logtest"
)

// TestDeliveryLogLines: every line the dispatcher logs about an event
// names the event, its Subscription and the function it goes to, under
// the stable keys eventID, namespace, subscription and function; lines
// about a Subscription's worker (no event) name the Subscription.
func TestDeliveryLogLines(t *testing.T) {
	var buf logtest.Buffer
	root, err := logging.New(&buf, "debug", logging.JSON)
	require.NoError(t, err)
	b := newBridge(t, withOption(dispatcher.WithLogger(logging.Component(root, "dispatcher"))))
	fn := b.newSink("fn", func(n int, _ *http.Request, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // retried
		case 2:
			w.WriteHeader(http.StatusBadRequest) // dead-lettered
		default:
			w.Header().Set("Ce-Specversion", "1.0") // an invalid reply: no id, source, type
			w.WriteHeader(http.StatusOK)
		}
	})
	b.subscribe(sub("orders", "fn", config("backoffInitial", "10ms", "backoffMax", "10ms")))
	b.publish("shop", "order.created.v1", "e-1", "x")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)
	b.publish("shop", "order.created.v1", "e-2", "x")
	require.Eventually(t, func() bool {
		return fn.count() == 3 && strings.Contains(buf.String(), "sink replied with an invalid CloudEvent, dropped")
	}, wait, tick)

	worker := []string{"consumer unavailable, retrying", "sink has no ready endpoint, not pulling", "giving up events over the backlog budget failed"}
	seen := map[string]bool{}
	for _, l := range logtest.CheckLayout(t, buf.String(), "dispatcher") {
		msg := l.String("msg")
		seen[msg] = true
		assert.Equal(t, "default", l.String("namespace"), msg)
		assert.Equal(t, "orders", l.String("subscription"), msg)
		assert.Equal(t, "fn", l.String("function"), msg)
		if slices.Contains(worker, msg) {
			continue
		}
		assert.Contains(t, []string{"e-1", "e-2"}, l.String("eventID"), "delivery line %q names the event", msg)
		assert.NotNil(t, l["attempt"], msg)
	}
	for _, msg := range []string{"delivery failed, will retry", "event dead-lettered", "sink replied with an invalid CloudEvent, dropped"} {
		assert.True(t, seen[msg], "logged %q", msg)
	}
}
