package dispatcher_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
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

// TestANamespacesEventsLogWithinTheirLines: namespace mallory's sink
// answers 400 to each of 100 events (a dead letter, and a line, each);
// with 1 line a second per namespace (bursts of 10) mallory's lines stay
// within the burst and the rate, the line after those dropped says how
// many were (all but those logged, of its events dead-lettered before it),
// and the victim's dead letter, after all of mallory's, is still logged.
func TestANamespacesEventsLogWithinTheirLines(t *testing.T) {
	var buf logtest.Buffer
	root, err := logging.New(&buf, "info", logging.JSON)
	require.NoError(t, err)
	b := newBridge(t, withOption(dispatcher.WithLogger(logging.Component(root, "dispatcher"))),
		withConfig(func(c *dispatcher.Config) { c.LogLinesPerNamespace = 1 }))
	b.newSink("spam", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
	b.newSink("ledger", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
	b.subscribe(sub("spam", "spam", func(s *v1alpha2.Subscription) {
		s.Namespace = "mallory"
		s.Spec.Sink = "http://spam.mallory.svc.cluster.local/"
		s.Spec.Types = []string{"spam.fail.v1"}
	}))
	b.subscribe(sub("ledger", "ledger"))
	start := time.Now()
	const spam = 100
	for i := range spam {
		b.publish("shop", "spam.fail.v1", fmt.Sprint("spam-", i), "x")
	}
	require.Eventually(t, func() bool { return len(b.deadLetters()) == spam }, wait, tick)
	b.publish("shop", "order.created.v1", "pay-1", "x")
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), `"eventID":"pay-1"`) }, wait, tick, "the victim's line")
	// Once its bucket has a line again (a second), one more of mallory's
	// says how many were dropped.
	sent := spam
	require.Eventually(t, func() bool {
		if strings.Contains(buf.String(), `"droppedLines"`) {
			return true
		}
		b.publish("shop", "spam.fail.v1", fmt.Sprint("spam-", sent), "x")
		sent++
		return false
	}, 2*wait, 200*time.Millisecond, "mallory's line past the rate, saying how many were dropped")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == sent+1 }, wait, tick)

	elapsed := time.Since(start)
	var mallory int
	var dropped float64
	for _, l := range logtest.CheckLayout(t, buf.String(), "dispatcher") {
		if l.String("namespace") != "mallory" || l.String("eventID") == "" {
			continue
		}
		mallory++
		if n, ok := l["droppedLines"].(float64); ok {
			dropped += n
		}
	}
	assert.LessOrEqual(t, mallory, 10+int(elapsed.Seconds())+1, "mallory's lines in %s", elapsed)
	// Every line dropped among the first 100 is told; of the events sent
	// after (one a tick until a line told), the last may have been dropped
	// after the line that told.
	assert.GreaterOrEqual(t, dropped, float64(spam-mallory), "the lines dropped are told")
	assert.LessOrEqual(t, dropped, float64(sent-mallory), "no more than were dropped")
}
