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

	p := newPuller(nc, "events", time.Hour) // no request of the test expires by itself
	require.NoError(t, p.listen())
	got := make(chan jetstream.Msg, 10)
	pl := p.add("c", 1, func(m *event) { got <- m })
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
