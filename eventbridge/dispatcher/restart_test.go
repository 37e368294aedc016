package dispatcher_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

func TestDeliversAcrossNATSRestart(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	// Memory storage does not survive a restart; this test needs the file store.
	b.streams.Storage = stream.StorageFile
	require.NoError(t, b.js.DeleteStream(context.Background(), b.streams.EventStream))
	require.NoError(t, b.js.DeleteStream(context.Background(), b.streams.DeadLetterStream))
	require.NoError(t, jsstream.Ensure(context.Background(), b.js, b.streams))
	b.subscribe(sub("s", "fn"))
	b.publish("shop", "order.created.v1", "before", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)

	b.nats.Restart()
	// Connected is not enough: JetStream recovers its file store first,
	// which takes a while on a loaded machine.
	require.Eventually(t, func() bool {
		if !b.js.Conn().IsConnected() {
			return false
		}
		_, err := b.js.Stream(context.Background(), b.streams.EventStream)
		return err == nil
	}, wait, tick)
	b.publish("shop", "order.created.v1", "after", "")
	require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick)
}

func TestRebindsWhenNATSLostEverything(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	s := sub("s", "fn")
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "before", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)

	b.nats.Wipe()
	require.Eventually(t, func() bool {
		if !b.js.Conn().IsConnected() {
			return false
		}
		_, err := b.js.AccountInfo(context.Background())
		return err == nil
	}, wait, tick)
	// What the reconciler does after a loss: streams and consumer again.
	require.NoError(t, jsstream.Ensure(context.Background(), b.js, b.streams))
	b.subscribe(s)
	for i := range 3 {
		b.publish("shop", "order.created.v1", "after"+strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() == 4 }, wait, tick)
}

// TestStopDoesNotWaitForASinkThatNeverAnswers: a dispatcher stopping
// while a delivery waits on a sink that never answers (a tenant's, say)
// ends it after its ShutdownGrace, not after the minute of its request
// timeout, so that no sink holds up a restart of the shared dispatcher;
// the event comes again after the ack wait and another replica delivers
// it.
func TestStopDoesNotWaitForASinkThatNeverAnswers(t *testing.T) {
	b := newBridge(t)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	var answering atomic.Bool
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		if !answering.Load() {
			select {
			case <-stuck:
			case <-r.Context().Done():
			}
		}
	})
	s := sub("s", "fn")
	b.consumer(s, 2*time.Second)
	js, err := jetstream.New(b.nats.Connect())
	require.NoError(t, err)
	d, err := dispatcher.New(js, dispatcher.Config{Streams: b.streams, RequestTimeout: time.Minute, ShutdownGrace: 200 * time.Millisecond, PullExpiry: time.Second, Egress: loopback},
		dispatcher.WithResolver(dispatcher.ResolverFunc(b.resolve)))
	require.NoError(t, err)
	require.NoError(t, d.Upsert(s))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- d.Start(ctx) }()
	b.publish("shop", "order.created.v1", "stuck", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick, "the delivery waits on the sink")

	cancel()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher waited for the sink's answer: a minute")
	}
	answering.Store(true)
	other := b.newReplica("other", 5*time.Second)
	other.serve(t, s)
	require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick, "the event comes again and another replica delivers it")
}
