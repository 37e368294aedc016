package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/internal/natstest"
	"github.com/kfn-dev/kfn/eventbridge/stream"
)

// A reconnect whose status event never reached the puller (nats.go drops
// an event its listener has no room for, and tells none from before the
// listener existed) is noticed at the next renewal: the requests lost with
// the old connection are asked again then, not after their expiry.
//
// The test drives the puller without run, so that it reads no status
// event: renew is what run's ticker calls.
func TestPullerAsksAgainAfterAnUntoldReconnect(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)

	p := newPuller(nc, "events", time.Hour, heldBytes{}) // no request of the test expires by itself
	require.NoError(t, p.listen())
	got := make(chan jetstream.Msg, 10)
	pl := p.add("c", 1, func(m *event) bool { got <- m; return true })
	pl.start()
	require.NoError(t, nc.Flush()) // the request is on the server

	// The puller was told that the connection is reconnecting, and is
	// told nothing more.
	p.mu.Lock()
	p.followLocked(false, 0)
	p.mu.Unlock()
	srv.Restart() // the request waiting on the server is gone with it
	require.Eventually(t, func() bool {
		if !nc.IsConnected() {
			return false
		}
		// The consumer answers pull requests (until then they get 503,
		// which the worker would handle by starting the pull again).
		cons, err := js.Consumer(ctx, "events", "c")
		if err != nil {
			return false
		}
		batch, err := cons.FetchNoWait(1)
		if err != nil {
			return false
		}
		for range batch.Messages() {
		}
		return batch.Error() == nil
	}, 10*time.Second, 10*time.Millisecond)
	p.renew(time.Now())

	_, err = js.Publish(ctx, "ev.1", []byte("after the restart"))
	require.NoError(t, err)
	select {
	case m := <-got:
		require.Equal(t, "after the restart", string(m.Data()))
		require.NoError(t, m.Ack())
	case <-time.After(5 * time.Second):
		t.Fatal("the event published after the reconnect was not delivered: the lost request was not asked again")
	}
}

// A worker replaced by Upsert (its Subscription changed) has its pull take
// the consumer's events before Upsert returns and the old worker stops: an
// event arriving in between finds a pull to take it, not none (which would
// leave it for the ack wait).
func TestReplacedWorkerPullsBeforeTheOldStops(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect())
	require.NoError(t, err)
	d, err := New(js, Config{Streams: stream.DefaultConfig()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.puller != nil }, 5*time.Second, time.Millisecond)

	s := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec:       v1alpha2.SubscriptionSpec{Sink: "http://fn.default.svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
	}
	pullOf := func() (*pull, *pull) {
		d.mu.Lock()
		w := d.workers[key{"default", "s"}]
		d.mu.Unlock()
		d.puller.mu.Lock()
		defer d.puller.mu.Unlock()
		return w.pl, d.puller.byName[stream.ConsumerName("default", "s")]
	}
	for _, inFlight := range []string{"1", "5"} {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: v1alpha2.ConfigValue(inFlight)}
		require.NoError(t, d.Upsert(s))
		own, routed := pullOf()
		require.NotNil(t, own, "maxInFlightMessages %s", inFlight)
		require.Same(t, own, routed, "maxInFlightMessages %s: the consumer's events go to the current worker once Upsert returns", inFlight)
	}
}

// TestPullerKeepsToItsByteBounds: events of about 100 KiB, a pull that may
// hold 250 KiB and a puller that may hold 350 KiB for all its pulls: the
// worker is given two events, not the ten its batch asks for, and one
// more only once it releases one; a second Subscription gets the room
// left of the total, one event; and an event larger than the room is
// still given, alone, to a pull that holds nothing.
func TestPullerKeepsToItsByteBounds(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	for _, c := range []string{"a", "b"} {
		_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: c, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ev." + c})
		require.NoError(t, err)
	}
	data := make([]byte, 100<<10)
	for range 10 {
		_, err = js.Publish(ctx, "ev.a", data)
		require.NoError(t, err)
		_, err = js.Publish(ctx, "ev.b", data)
		require.NoError(t, err)
	}

	p := newPuller(nc, "events", time.Hour, heldBytes{total: 350 << 10, perPull: 250 << 10})
	require.NoError(t, p.listen())
	got := map[string]chan *event{"a": make(chan *event, 10), "b": make(chan *event, 10)}
	pa := p.add("a", 10, func(e *event) bool { got["a"] <- e; return true })
	pa.start()
	count := func(c string) int { return len(got[c]) }
	require.Eventually(t, func() bool { return count("a") == 2 }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return count("a") > 2 }, 200*time.Millisecond, 5*time.Millisecond, "250 KiB hold two events of 100 KiB")

	pb := p.add("b", 10, func(e *event) bool { got["b"] <- e; return true })
	pb.start()
	require.Eventually(t, func() bool { return count("b") == 1 }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return count("b") > 1 }, 200*time.Millisecond, 5*time.Millisecond, "the total's 350 KiB leave room for one more")

	first := <-got["a"]
	require.NoError(t, first.Ack())
	first.release()
	require.Eventually(t, func() bool { return count("a") == 2 }, 5*time.Second, time.Millisecond, "one released, one more given")

	// Room for less than one event: a pull that holds nothing still gets one.
	p.mu.Lock()
	p.bounds = heldBytes{perPull: 50 << 10}
	p.mu.Unlock()
	for _, e := range drain(got["b"]) {
		e.release()
	}
	require.Eventually(t, func() bool { return count("b") == 1 }, 5*time.Second, time.Millisecond, "an event larger than the room, alone")
	require.Never(t, func() bool { return count("b") > 1 }, 200*time.Millisecond, 5*time.Millisecond)
}

func drain(c chan *event) []*event {
	var out []*event
	for {
		select {
		case e := <-c:
			out = append(out, e)
		default:
			return out
		}
	}
}
