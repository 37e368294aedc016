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

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// in puts the Subscription in namespace ns, its sink the Service service
// of ns, for events of typ.
func in(ns, service, typ string) func(*v1alpha2.Subscription) {
	return func(s *v1alpha2.Subscription) {
		s.Namespace = ns
		s.Spec.Sink = "http://" + service + "." + ns + ".svc.cluster.local/events"
		s.Spec.Types = []string{typ}
	}
}

// waitingIn is what JetStream counts as waiting for ns/name, -1 when it
// cannot be read (it fails no test, as waiting).
func waitingIn(b *bridge, ns, name string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := b.js.Consumer(ctx, b.streams.EventStream, stream.ConsumerName(ns, name))
	if err != nil {
		return -1
	}
	info, err := c.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.NumPending) + info.NumAckPending
}

// lettersOf returns the ids of the dead letters of namespace ns.
func lettersOf(b *bridge, ns string) []string {
	var ids []string
	for _, dl := range b.deadLetters() {
		if dl.Headers().Get(deadletter.HeaderNamespace) == ns {
			ids = append(ids, dl.Headers().Get("ce-id"))
		}
	}
	return ids
}

// TestNamespaceBacklogTotal: a namespace's Subscriptions, each within its
// own maxBacklog, wait together for more than the namespace's total:
// the namespace's oldest events are given up until it is within it, and
// another namespace's Subscription, within the total, keeps every event.
func TestNamespaceBacklogTotal(t *testing.T) {
	eps := newEndpoints(false)
	b := newBridge(t, withEndpoints(eps), withConfig(fastBudget), withConfig(func(c *dispatcher.Config) {
		c.NamespaceMaxBacklog = 60
	}))
	for _, name := range []string{"ta", "tb", "v"} {
		b.newSink(name, nil)
	}
	own := config("maxBacklog", "100")
	b.subscribe(sub("ta", "ta", own, in("tenant", "ta", "order.a.v1")))
	b.subscribe(sub("tb", "tb", own, in("tenant", "tb", "order.b.v1")))
	b.subscribe(sub("v", "v", own, in("victim", "v", "order.c.v1")))
	for _, typ := range []string{"a", "b", "c"} {
		for i := range 50 {
			b.publish("shop", "order."+typ+".v1", typ+strconv.Itoa(i), "")
		}
	}
	require.Eventually(t, func() bool {
		return waitingIn(b, "tenant", "ta")+waitingIn(b, "tenant", "tb") == 60
	}, wait, tick, "the namespace is held to its total")
	require.Never(t, func() bool {
		return waitingIn(b, "tenant", "ta")+waitingIn(b, "tenant", "tb") < 60 || waitingIn(b, "victim", "v") != 50
	}, 300*time.Millisecond, tick, "exactly the excess, and nothing of the other namespace")
	assert.Equal(t, 10, waitingIn(b, "tenant", "ta"), "the oldest of the namespace go: those of its first Subscription")
	assert.Equal(t, 50, waitingIn(b, "tenant", "tb"))
	assert.Empty(t, lettersOf(b, "victim"))
	letters := b.deadLetters()
	require.Len(t, letters, 40)
	for _, dl := range letters {
		assert.True(t, strings.HasPrefix(dl.Headers().Get("ce-id"), "a"), "given up: %s", dl.Headers().Get("ce-id"))
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "namespace tenant's backlog over its total (60 events")
	}
}

// TestSubscriptionBudgetIsHeldToTheStream: a Subscription whose sink has
// no endpoint asks for the largest budgets the API takes (a million
// events, 4 GiB) on an event stream of 8 MiB. Its budget is held to its
// namespace's total, by default a 16th of the stream, so publishing never
// fails and another namespace's healthy Subscription gets every event;
// without that, the stream fills and every publish answers 507.
func TestSubscriptionBudgetIsHeldToTheStream(t *testing.T) {
	eps := newEndpoints(false, "victim")
	b := newBridge(t, withEndpoints(eps), withConfig(fastBudget), withConfig(func(c *dispatcher.Config) {
		c.Streams.MaxBytes = 8 << 20
		c.Streams.MaxMsgSize = 128 << 10
	}))
	b.newSink("hog", nil)
	victim := b.newSink("victim", nil)
	b.subscribe(sub("hog", "hog", config("maxBacklog", "1000000", "maxBacklogBytes", "4294967296"), in("attacker", "hog", "order.big.v1")))
	b.subscribe(sub("victim", "victim", in("victim", "victim", "order.created.v1")))
	data := strings.Repeat("x", 64<<10)
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	const events = 300 // 19 MiB, more than twice the stream
	failed := 0
	for i := range events {
		<-tk.C
		if err := b.publishErr("shop", "order.big.v1", strconv.Itoa(i), data); err != nil {
			failed++
		}
		if err := b.publishErr("shop", "order.created.v1", "v"+strconv.Itoa(i), "small"); err != nil {
			failed++
		}
	}
	assert.Zero(t, failed, "no publish fails")
	require.Eventually(t, func() bool { return victim.count() == events }, wait, tick, "the other namespace gets every event")
	require.Eventually(t, func() bool { n := waitingIn(b, "attacker", "hog"); return n >= 0 && n*(64<<10) <= 512<<10 }, wait, tick,
		"the attacker's backlog is held to a 16th of the stream")
	ids := lettersOf(b, "attacker")
	assert.NotEmpty(t, ids)
	for _, dl := range b.deadLetters() {
		assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "namespace attacker's")
	}
}

// fillDeadLetters fills the dead-letter stream with letters of 8 KiB on
// subject (of a namespace, or a legacy one no namespace holds) and returns
// their data.
func fillDeadLetters(t *testing.T, b *bridge, subject string) []byte {
	t.Helper()
	filler := eventstore.New(b.js, b.streams.DeadLetterStream)
	data := []byte(strings.Repeat("x", 8<<10))
	for seq := uint64(1); ; seq++ {
		f := deadletter.Failure{Namespace: "other", Subscription: "s", Status: 500, Error: "failed", Attempts: 1,
			Subject: "kyma.shop.order.created.v1", Sequence: seq, At: time.Now()}
		msg := deadletter.NewMsg(nats.Header{"ce-id": {strconv.FormatUint(seq, 10)}}, data, f)
		msg.Subject = subject
		_, err := filler.Put(context.Background(), eventstore.Restore(msg, deadletter.MsgID(f)))
		if err != nil {
			require.ErrorIs(t, err, eventstore.ErrStorageFull)
			return data
		}
	}
}

// fullDeadLetterBridge is a bridge whose dead-letter stream takes 64 KiB.
func fullDeadLetterBridge(t *testing.T) *bridge {
	return newBridge(t, withConfig(fastBudget), withConfig(func(c *dispatcher.Config) {
		c.Streams.MaxMsgSize = 16 << 10
		c.Streams.DeadLetterMaxBytes = 64 << 10
	}))
}

// TestFullDeadLetterStreamMakesRoomWithTheLargestHolder: another
// namespace's letters fill the dead-letter stream, and an event of this
// namespace runs out of attempts. It has no dead letter of its own to
// give up for the new one, and the other namespace holds more: the other's
// oldest makes room, and the event is dead-lettered. Before, it was
// dropped, however many letters the other namespace held.
func TestFullDeadLetterStreamMakesRoomWithTheLargestHolder(t *testing.T) {
	b := fullDeadLetterBridge(t)
	data := fillDeadLetters(t, b, stream.DeadLetterSubject("other"))
	before := lettersOf(b, "other")
	b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	b.subscribe(sub("dead", "dead", config("maxDeliver", "1"), in("tenant", "dead", "order.created.v1")))
	b.publish("shop", "order.created.v1", "kept", string(data))
	require.Eventually(t, func() bool { return slices.Equal(lettersOf(b, "tenant"), []string{"kept"}) }, wait, tick, "the event is dead-lettered")
	after := lettersOf(b, "other")
	assert.Equal(t, before[len(before)-len(after):], after, "the other namespace gave up its oldest, and only them")
	assert.Less(t, len(after), len(before))
	assert.Zero(t, b.gauge("kfn_eventbridge_dead_letters_refused_total", map[string]string{"namespace": "tenant", "subscription": "dead"}))
}

// TestFullDeadLetterStreamDropsTheEvent: letters no namespace holds (on
// the per-consumer subjects of before the per-namespace bounds) fill the
// dead-letter stream, and an event runs out of attempts. No namespace
// has a letter to give up for the new one: the event is dropped, counted
// and logged, not kept in the shared event stream to be given up again
// for ever (which filled the event stream for everyone while the
// dead-letter stream was full).
func TestFullDeadLetterStreamDropsTheEvent(t *testing.T) {
	b := fullDeadLetterBridge(t)
	data := fillDeadLetters(t, b, stream.LegacyDeadLetterSubject("kfn-legacy"))
	b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	b.subscribe(sub("dead", "dead", config("maxDeliver", "1"), in("tenant", "dead", "order.created.v1")))
	b.publish("shop", "order.created.v1", "lost", string(data))
	labels := map[string]string{"namespace": "tenant", "subscription": "dead"}
	require.Eventually(t, func() bool {
		return waitingIn(b, "tenant", "dead") == 0 && b.gauge("kfn_eventbridge_dead_letters_refused_total", labels) == 1
	}, wait, tick, "the event is dropped and counted, not kept")
	assert.Empty(t, lettersOf(b, "tenant"))
	assert.NotEmpty(t, b.deadLetters(), "the letters stay")
}

// TestBudgetHoldsASlowSinkOfLargeEvents: a slow sink whose events are
// large holds fewer than its maxInFlightMessages (the dispatcher's bytes
// per Subscription bound them), so it never had all of them in flight and
// its backlog was never read: it grew without bound past its budget. A
// pull that wants events and has no room for them counts as busy too.
func TestBudgetHoldsASlowSinkOfLargeEvents(t *testing.T) {
	b := newBridge(t, withConfig(fastBudget), withConfig(func(c *dispatcher.Config) { c.MaxHeldBytesPerSubscription = 256 << 10 }))
	b.newSink("slow", func(n int, r *http.Request, w http.ResponseWriter) { time.Sleep(time.Second) })
	b.subscribe(sub("slow", "slow", config("maxInFlightMessages", "10", "maxBacklog", "20")))
	data := strings.Repeat("x", 100<<10)
	for i := range 100 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), data)
	}
	require.Eventually(t, func() bool { n := waiting(b, "slow"); return n >= 0 && n <= 20 }, 5*time.Second, tick, "held to its budget")
	assert.NotEmpty(t, deadLetterIDs(t, b, "the sink does not keep up"))
}

// TestManyNamespacesAtTheirTotalDoNotFillTheStream: 24 namespaces, each a
// Subscription whose sink has no endpoint, each within its own total (a
// 16th of the stream), would hold half again the event stream's bytes
// together. Past three quarters of the stream, the namespaces holding the
// most are cut to a level that brings the stream back under it (those
// holding less than the level keep theirs): after each round of publishes
// the stream comes back under three quarters, so publishing never fails,
// and another namespace's healthy Subscription gets every event.
func TestManyNamespacesAtTheirTotalDoNotFillTheStream(t *testing.T) {
	eps := newEndpoints(false, "victim")
	b := newBridge(t, withEndpoints(eps), withConfig(fastBudget), withConfig(func(c *dispatcher.Config) {
		c.Streams.MaxBytes = 8 << 20
		c.Streams.MaxMsgSize = 128 << 10
	}))
	const tenants = 24
	for i := range tenants {
		ns := fmt.Sprintf("tenant-%d", i)
		b.newSink(ns, nil)
		b.subscribe(sub("s", ns, in(ns, ns, fmt.Sprintf("order.t%d.v1", i))))
	}
	victim := b.newSink("victim", nil)
	b.subscribe(sub("victim", "victim", in("victim", "victim", "order.created.v1")))
	// A namespace whose sink is down too, holding little: it keeps it.
	b.newSink("quiet", nil)
	b.subscribe(sub("quiet", "quiet", in("quiet", "quiet", "order.quiet.v1")))
	b.publish("shop", "order.quiet.v1", "q1", "small")
	b.publish("shop", "order.quiet.v1", "q2", "small")
	data := strings.Repeat("x", 64<<10)
	const rounds = 12 // 24 x 12 x 64 KiB: 18 MiB, more than twice the stream
	// A round (1.5 MiB) fits in the quarter above the level: as long as
	// the stream comes back under the level between rounds, no publish
	// can fail. How fast it comes back depends on the machine's load, so
	// the test waits for it instead of racing the budget with a rate.
	level := 3 * b.streams.MaxBytes / 4
	streamBytes := func() int64 {
		str, err := b.js.Stream(context.Background(), b.streams.EventStream)
		require.NoError(t, err)
		info, err := str.Info(context.Background())
		require.NoError(t, err)
		return int64(info.State.Bytes)
	}
	failed := 0
	for r := range rounds {
		for i := range tenants {
			if err := b.publishErr("shop", fmt.Sprintf("order.t%d.v1", i), fmt.Sprintf("%d-%d", i, r), data); err != nil {
				failed++
			}
		}
		if err := b.publishErr("shop", "order.created.v1", strconv.Itoa(r), "small"); err != nil {
			failed++
		}
		require.Eventually(t, func() bool { return streamBytes() <= level }, wait, tick,
			"round %d: the stream back under three quarters of its bytes (%d of %d)", r, streamBytes(), b.streams.MaxBytes)
	}
	assert.Zero(t, failed, "no publish fails")
	require.Eventually(t, func() bool { return victim.count() == rounds }, wait, tick, "the other namespace gets every event")
	assert.Equal(t, 2, waitingIn(b, "quiet", "quiet"), "a namespace holding less than the level keeps its events")
	assert.Empty(t, lettersOf(b, "quiet"))
	letters := b.deadLetters()
	assert.NotEmpty(t, letters, "those holding the most gave way")
	levelCut := 0
	for _, dl := range letters {
		if strings.Contains(dl.Headers().Get(deadletter.HeaderError), "the backlogs of all namespaces over three quarters of the event stream") {
			levelCut++
		}
	}
	assert.Positive(t, levelCut, "the reason says the stream's level cut them")
	t.Logf("%d of %d events of the %d namespaces given up", len(letters), tenants*rounds, tenants)
}
