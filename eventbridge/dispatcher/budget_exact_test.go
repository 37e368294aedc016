package dispatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
)

// waiting is what JetStream counts as waiting for the Subscription name,
// -1 when it cannot be read. It fails no test: testify runs the
// conditions of Eventually and Never on goroutines of their own, one of
// which may still run when the test has ended.
func waiting(b *bridge, name string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := b.js.Consumer(ctx, b.streams.EventStream, stream.ConsumerName("default", name))
	if err != nil {
		return -1
	}
	info, err := c.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.NumPending) + info.NumAckPending
}

// deadLetterIDs returns the ids of the dead letters, as numbers, sorted,
// and checks that each says why with want.
func deadLetterIDs(t *testing.T, b *bridge, want string) []int {
	t.Helper()
	var ids []int
	for _, dl := range b.deadLetters() {
		id, err := strconv.Atoi(dl.Headers().Get("ce-id"))
		require.NoError(t, err)
		ids = append(ids, id)
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), want)
	}
	slices.Sort(ids)
	return ids
}

// TestBudgetGivesUpExactlyTheExcessOfAFailingSink: a failing sink whose
// events wait a minute for their next attempt, 30 events, maxBacklog 10:
// 20 are given up, those that waited for their next attempt first, then
// the oldest, and exactly 10 stay (waiting plus unacknowledged), also
// through further checks. JetStream would count an event handed back with
// a delay as unacknowledged for that minute, out of the budget's reach.
func TestBudgetGivesUpExactlyTheExcessOfAFailingSink(t *testing.T) {
	b := newBridge(t, withConfig(fastBudget))
	failing := b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	b.subscribe(sub("dead", "dead", config("maxInFlightMessages", "5", "maxBacklog", "10", "backoffInitial", "1m", "backoffMax", "1m")))
	for i := range 30 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return len(b.deadLetters()) >= 20 && waiting(b, "dead") == 10 }, wait, tick)
	require.Never(t, func() bool { return len(b.deadLetters()) > 20 || waiting(b, "dead") > 10 }, 300*time.Millisecond, tick,
		"exactly the excess: no more given up, no more waiting")
	ids := deadLetterIDs(t, b, "backlog over maxBacklog (10)")
	require.Len(t, ids, 20)
	assert.Equal(t, []int{0, 1, 2, 3, 4}, ids[:5], "the events that waited for their next attempt go first")
	assert.Less(t, ids[19], 20+5, "then the oldest, but for an event in an attempt while the budget acts (at most maxInFlightMessages)")
	assert.Equal(t, 10, waiting(b, "dead"))
	assert.Positive(t, failing.count())
}

// TestBudgetHoldsASlowSink: a sink that answers, slowly: its deliveries
// keep all of its maxInFlightMessages busy, the backlog grows past its
// maxBacklog, and the oldest waiting are given up (the worker stops asking
// for events while over budget, so that JetStream's limit on
// unacknowledged events does not keep them out of reach), while every
// event is delivered or dead-lettered, and no more than the budget waits.
// Which are given up is the oldest waiting when the budget acts, less
// those that JetStream hands meanwhile to the worker's pull requests made
// before it stopped asking: those are delivered.
func TestBudgetHoldsASlowSink(t *testing.T) {
	b := newBridge(t, withConfig(fastBudget))
	slow := b.newSink("slow", func(n int, r *http.Request, w http.ResponseWriter) { time.Sleep(300 * time.Millisecond) })
	b.subscribe(sub("slow", "slow", config("maxInFlightMessages", "2", "maxBacklog", "6")))
	for i := range 30 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	var delivered int
	require.Eventually(t, func() bool {
		delivered = slow.count()
		n := waiting(b, "slow")
		// Some given up: the consumer counted the events (JetStream
		// tells its consumers of stored events on a goroutine of its
		// own, so that its count may lag the stores' acknowledgements,
		// and read 0 under load) and the budget acted.
		return n >= 0 && n <= 6 && len(b.deadLetters()) > 0
	}, wait, tick, "held to its budget")
	// Held by giving up the oldest, not by waiting for the sink: a
	// worker that kept asking for events would have JetStream hand each
	// freed slot to its own pull request, made before the budget's, and
	// the sink would have worked through most of them first.
	assert.LessOrEqual(t, delivered, 3*2, "delivered when the budget was reached (maxInFlightMessages 2)")
	require.Eventually(t, func() bool { return waiting(b, "slow") == 0 }, wait, tick, "the rest is delivered")
	letters := deadLetterIDs(t, b, "the sink does not keep up")
	assert.Equal(t, 30, slow.count()+len(letters), "every event delivered or dead-lettered, none twice")
	assert.GreaterOrEqual(t, len(letters), 30-6-3*2)
}

// TestBudgetInBytes: a Subscription whose sink has no endpoint, budgets
// of 1,000 events and 2 MiB: 40 events of 100 KiB (4 MiB) are over the
// bytes though far within the count, and the oldest are given up until
// about 2 MiB wait; 500 small events beside them, within both, are not.
func TestBudgetInBytes(t *testing.T) {
	eps := newEndpoints(false)
	b := newBridge(t, withEndpoints(eps), withConfig(fastBudget))
	b.newSink("big", nil)
	b.newSink("small", nil)
	b.subscribe(sub("big", "big", config("maxBacklog", "1000", "maxBacklogBytes", "2097152"), func(s *v1alpha2.Subscription) { s.Spec.Types = []string{"order.big.v1"} }))
	b.subscribe(sub("small", "small", config("maxBacklog", "1000", "maxBacklogBytes", "2097152")))
	data := strings.Repeat("x", 100<<10)
	for i := range 40 {
		b.publish("shop", "order.big.v1", strconv.Itoa(i), data)
	}
	for i := range 500 {
		b.publish("shop", "order.created.v1", "s"+strconv.Itoa(i), "small")
	}
	require.Eventually(t, func() bool { n := waiting(b, "big"); return n >= 0 && n*(100<<10) <= 2<<20 }, wait, tick, "about 2 MiB wait")
	require.Never(t, func() bool { return waiting(b, "big") < 18 }, 300*time.Millisecond, tick, "not much less either")
	ids := deadLetterIDs(t, b, "backlog over maxBacklogBytes (2097152")
	assert.Equal(t, 40-waiting(b, "big"), len(ids))
	assert.Equal(t, 0, ids[0], "the oldest go")
	assert.Equal(t, 500, waiting(b, "small"), "small events within both budgets all wait")
}

// TestBudgetGivesUpTheOldestRetriesFirst: a failing sink, maxBacklog and
// maxInFlightMessages 20: twenty events fail their first attempt and wait
// a minute for their next in the worker, within the budget. Ten more put
// the backlog ten over: the budget gives up ten events, first those
// waiting for their next attempt, earliest in the stream first (a slot it
// frees takes one of the ten newer events, whose attempt fails meanwhile
// and is given up in its turn, so how many of the twenty go varies; which
// go does not).
func TestBudgetGivesUpTheOldestRetriesFirst(t *testing.T) {
	b := newBridge(t, withConfig(fastBudget))
	b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	b.subscribe(sub("dead", "dead", config("maxInFlightMessages", "20", "maxBacklog", "20", "backoffInitial", "1m", "backoffMax", "1m")))
	for i := range 20 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return failedAttempts(b) == 20 }, wait, tick, "every event's first attempt failed")
	require.Empty(t, b.deadLetters(), "within the budget")
	for i := 20; i < 30; i++ {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return len(b.deadLetters()) >= 10 }, wait, tick)
	if !assert.Never(t, func() bool { return len(b.deadLetters()) > 10 }, 300*time.Millisecond, tick, "the excess only") {
		t.Fatalf("dead letters: %s", describeLetters(b))
	}
	var retried []int // given up while waiting for their next attempt
	for _, id := range deadLetterIDs(t, b, "backlog over maxBacklog (20)") {
		if id < 20 {
			retried = append(retried, id)
		}
	}
	t.Logf("%d of the 20 waiting given up: %v", len(retried), retried)
	require.NotEmpty(t, retried, "the events waiting for their next attempt go first")
	for i, id := range retried {
		assert.Equal(t, i, id, "the earliest in the stream first")
	}
}

// describeLetters says of each dead letter its event's id, attempts and
// error, for a failure's message.
func describeLetters(b *bridge) string {
	var d []string
	for _, dl := range b.deadLetters() {
		h := dl.Headers()
		d = append(d, fmt.Sprintf("%s (attempts %s, sequence %s: %s)", h.Get("ce-id"), h.Get(deadletter.HeaderAttempts), h.Get(deadletter.HeaderSequence), h.Get(deadletter.HeaderError)))
	}
	return strings.Join(d, "; ")
}

// failedAttempts reads kfn_eventbridge_delivery_failures_total, summed,
// -1 when it cannot; like waiting, it fails no test.
func failedAttempts(b *bridge) int {
	families, err := b.reg.Gather()
	if err != nil {
		return -1
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() == "kfn_eventbridge_delivery_failures_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}
