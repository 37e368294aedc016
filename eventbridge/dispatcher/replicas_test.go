package dispatcher_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// replica is another dispatcher serving the bridge's Subscriptions, as a
// replica in another process does: on a NATS connection of its own. Its
// requests to a sink carry ?replica=<name>, so the sink can tell who
// delivered.
type replica struct {
	name string
	nc   *nats.Conn
	d    *dispatcher.Dispatcher
}

func (b *bridge) newReplica(name string, requestTimeout time.Duration) *replica {
	b.t.Helper()
	r := &replica{name: name, nc: b.nats.Connect()}
	js, err := jetstream.New(r.nc)
	require.NoError(b.t, err)
	resolve := func(s v1alpha2.Sink) (string, error) {
		u, err := b.resolve(s)
		return u + "?replica=" + name, err
	}
	r.d, err = dispatcher.New(js, dispatcher.Config{Streams: b.streams, Jitter: -1, RequestTimeout: requestTimeout, PullExpiry: time.Second, Egress: loopback},
		dispatcher.WithResolver(dispatcher.ResolverFunc(resolve)))
	require.NoError(b.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.d.Start(ctx); close(done) }()
	b.t.Cleanup(func() { cancel(); <-done })
	return r
}

// serve makes the replica serve s, whose consumer exists.
func (r *replica) serve(t *testing.T, s *v1alpha2.Subscription) {
	t.Helper()
	require.NoError(t, r.d.Upsert(s))
}

// die ends the replica as a killed process ends: its connection is gone,
// nothing it holds is settled, and it tells JetStream nothing more.
func (r *replica) die() { r.nc.Close() }

// consumer makes the Subscription's consumer with the given ack wait,
// without serving it from the bridge's own dispatcher.
func (b *bridge) consumer(s *v1alpha2.Subscription, ackWait time.Duration) {
	b.t.Helper()
	cfg, err := jsstream.ConsumerConfig(s, stream.ConsumerSettings{AckWait: ackWait})
	require.NoError(b.t, err)
	_, err = jsstream.EnsureConsumer(context.Background(), b.js, b.streams.EventStream, cfg)
	require.NoError(b.t, err)
}

// byReplica counts a sink's deliveries by the replica that made them.
func byReplica(k *sink) map[string]int {
	out := map[string]int{}
	for _, d := range k.deliveries() {
		out[d.replica]++
	}
	return out
}

func TestReplicasShareEverySubscriptionWithinMaxInFlight(t *testing.T) {
	b := newBridge(t)
	// A function that takes a moment per event, so that events overlap.
	k := b.newSink("fn", func(int, *http.Request, http.ResponseWriter) { time.Sleep(5 * time.Millisecond) })
	s := sub("s", "fn", config("maxInFlightMessages", "3"))
	b.consumer(s, 2*time.Second)
	for _, name := range []string{"a", "b"} {
		b.newReplica(name, 5*time.Second).serve(t, s)
	}
	const n = 60
	for i := range n {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() == n }, wait, tick)
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 }, wait, tick)

	ids := map[string]int{}
	for _, d := range k.deliveries() {
		ids[d.header.Get("Ce-Id")]++
	}
	assert.Len(t, ids, n, "every event delivered")
	for id, times := range ids {
		assert.Equal(t, 1, times, "event %s delivered once", id)
	}
	got := byReplica(k)
	assert.Positive(t, got["a"], "replica a delivered some events: %v", got)
	assert.Positive(t, got["b"], "replica b delivered some events: %v", got)
	assert.LessOrEqual(t, k.maxInFlight(), 3, "never more than maxInFlightMessages across replicas")
}

func TestReplicasKeepOrderWithOneInFlight(t *testing.T) {
	b := newBridge(t)
	var mu sync.Mutex
	failures := 0
	k := b.newSink("fn", func(_ int, _ *http.Request, w http.ResponseWriter) {
		if rand.IntN(4) == 0 { // a quarter of the attempts fail
			mu.Lock()
			failures++
			mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	s := sub("s", "fn", config("maxInFlightMessages", "1", "maxDeliver", "100", "backoffInitial", "10ms", "backoffMax", "20ms"))
	b.consumer(s, 2*time.Second)
	for _, name := range []string{"a", "b"} {
		b.newReplica(name, 5*time.Second).serve(t, s)
	}
	const n = 40
	for i := range n {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return k.count() == n+failures
	}, wait, tick)
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 }, wait, tick)

	last := -1
	for _, d := range k.deliveries() {
		id, err := strconv.Atoi(d.header.Get("Ce-Id"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, id, last, "an event never overtakes an earlier one, whichever replica delivers it")
		last = id
	}
	assert.Equal(t, n-1, last)
	assert.Equal(t, 1, k.maxInFlight(), "one at a time across both replicas")
	got := byReplica(k)
	assert.Positive(t, got["a"], "replica a delivered some events: %v", got)
	assert.Positive(t, got["b"], "replica b delivered some events: %v", got)
}

// A replica that dies holding events (its process killed: nothing
// settled, no in-progress signal any more) hands them over: JetStream
// gives them to the other replica once their ack wait runs out, which is
// at most the ack wait after the death, since the dead replica signalled
// progress every half of it.
func TestDeadReplicaHandsItsEventsOverWithinTheAckWait(t *testing.T) {
	b := newBridge(t)
	const ackWait = 2 * time.Second
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	k := b.newSink("fn", func(_ int, r *http.Request, _ http.ResponseWriter) {
		if r.URL.Query().Get("replica") == "a" {
			<-release // a's function never answers while a lives
		}
	})
	s := sub("s", "fn", config("maxInFlightMessages", "4"))
	b.consumer(s, ackWait)
	a := b.newReplica("a", time.Minute)
	a.serve(t, s)
	// Cleanups run last first: the held requests are released before the
	// replicas stop, which wait for them.
	t.Cleanup(free)
	const n = 12
	for i := range n {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() == 4 }, wait, tick, "replica a holds maxInFlightMessages events")
	held := map[string]bool{}
	for _, d := range k.deliveries() {
		held[d.header.Get("Ce-Id")] = true
	}
	bb := b.newReplica("b", 5*time.Second)
	bb.serve(t, s)
	require.Never(t, func() bool { return k.count() > 4 }, ackWait/2, tick, "b gets nothing while a holds every slot")

	died := time.Now()
	a.die()
	require.Eventually(t, func() bool { return byReplica(k)["b"] == n }, ackWait+wait, tick, "b delivers every event, a's too")
	for _, d := range k.deliveries() {
		if d.replica == "b" && held[d.header.Get("Ce-Id")] {
			assert.Less(t, d.at.Sub(died), ackWait+time.Second,
				"event %s, held by the dead replica, is delivered again within the ack wait of its death", d.header.Get("Ce-Id"))
		}
	}
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 }, wait, tick)
}
