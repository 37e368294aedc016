package dispatcher_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/replay"
)

func TestDeadLetterReplayDeliversToItsSubscriptionOnly(t *testing.T) {
	b := newBridge(t)
	var healthy atomic.Bool
	broken := b.newSink("broken", func(n int, r *http.Request, w http.ResponseWriter) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusNotFound)
		}
	})
	other := b.newSink("other", nil)
	b.subscribe(sub("broken", "broken"))
	b.subscribe(sub("other", "other"))
	b.publish("shop", "order.created.v1", "x", "payload")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 && other.count() == 1 }, wait, tick)

	admin, err := deadletter.NewAdmin(b.js, b.streams)
	require.NoError(t, err)
	letters, err := admin.List(context.Background(), deadletter.Filter{Namespace: "default", Subscription: "broken"})
	require.NoError(t, err)
	require.Len(t, letters, 1)

	healthy.Store(true) // the function was fixed
	_, err = admin.Replay(context.Background(), letters[0].Sequence)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return broken.count() == 2 }, wait, tick)
	got := broken.deliveries()[1]
	assert.Equal(t, "x", got.header.Get("Ce-Id"))
	assert.Equal(t, "payload", got.body)
	require.Never(t, func() bool { return other.count() > 1 }, 200*time.Millisecond, tick, "the other Subscription does not get it again")

	// Once the replay settled, a sweep gives the consumer back its one
	// subject, and it goes on delivering.
	filters := replay.Filters{JetStream: b.js, Streams: b.streams}
	require.Eventually(t, func() bool { n, err := filters.Sweep(context.Background()); return err == nil && n == 1 }, wait, tick)
	b.publish("shop", "order.created.v1", "y", "after")
	require.Eventually(t, func() bool { return broken.count() == 3 && other.count() == 2 }, wait, tick)
}
