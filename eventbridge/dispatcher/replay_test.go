package dispatcher_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
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

// A replayed event whose delivery fails waits for its retry in the stream,
// unacknowledged: the sweep keeps the replay subject in the consumer's
// filter meanwhile, and the retry delivers it once the sink is back.
// Taken out, the interest-retention stream would drop the event.
func TestReplayedEventWaitingForItsRetryKeepsTheReplaySubject(t *testing.T) {
	b := newBridge(t)
	var answer atomic.Int32 // the sink's status; 0 is 200
	answer.Store(http.StatusNotFound)
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		if s := answer.Load(); s != 0 {
			w.WriteHeader(int(s))
		}
	})
	s := sub("s", "fn", config("backoffInitial", "1s", "backoffMax", "1s"))
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "x", "payload")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)

	admin, err := deadletter.NewAdmin(b.js, b.streams)
	require.NoError(t, err)
	letters, err := admin.List(context.Background(), deadletter.Filter{Namespace: "default", Subscription: "s"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	answer.Store(http.StatusServiceUnavailable) // the function came back, overloaded
	_, err = admin.Replay(context.Background(), letters[0].Sequence)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick, "the replayed event is delivered, and fails")

	// Its retry waits a second: the sweep runs meanwhile.
	filters := replay.Filters{JetStream: b.js, Streams: b.streams}
	n, err := filters.Sweep(context.Background())
	swept := time.Now()
	require.NoError(t, err)
	assert.Zero(t, n, "the replay waiting for its retry keeps the subject")
	replaySubject := stream.ReplaySubject(stream.ConsumerName(s.Namespace, s.Name))
	assert.Contains(t, b.consumerInfo(s).Config.FilterSubjects, replaySubject)

	answer.Store(0)
	require.Eventually(t, func() bool { return k.count() == 3 }, wait, tick, "the retry delivers the replayed event")
	got := k.deliveries()[2]
	assert.Equal(t, "x", got.header.Get("Ce-Id"))
	assert.Equal(t, "payload", got.body)
	assert.True(t, got.at.After(swept), "the sweep ran while the replay waited for its retry")
	require.Eventually(t, func() bool { n, err := filters.Sweep(context.Background()); return err == nil && n == 1 }, wait, tick,
		"settled, the replay lets the sweep take the subject out")
	assert.NotContains(t, b.consumerInfo(s).Config.FilterSubjects, replaySubject)
}
