package dispatcher_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/stream"
)

func TestDeliversAcrossNATSRestart(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	// Memory storage does not survive a restart; this test needs the file store.
	b.streams.Storage = stream.StorageFile
	require.NoError(t, b.js.DeleteStream(context.Background(), b.streams.EventStream))
	require.NoError(t, b.js.DeleteStream(context.Background(), b.streams.DeadLetterStream))
	require.NoError(t, stream.Ensure(context.Background(), b.js, b.streams))
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
	require.NoError(t, stream.Ensure(context.Background(), b.js, b.streams))
	b.subscribe(s)
	for i := range 3 {
		b.publish("shop", "order.created.v1", "after"+strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() == 4 }, wait, tick)
}
