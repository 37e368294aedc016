package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/internal/jsstream"
)

// An idle Subscription's pull requests expire (after the bridge's pull
// expiry of a second) and are renewed: an event published after several
// expiries is delivered at once.
func TestIdleSubscriptionIsPulledAcrossExpiries(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	b.subscribe(sub("s", "fn"))
	require.Never(t, func() bool { return k.count() > 0 }, 3500*time.Millisecond, 50*time.Millisecond, "idle through three expiries")
	published := time.Now()
	b.publish("shop", "order.created.v1", "late", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)
	require.Less(t, k.deliveries()[0].at.Sub(published), time.Second, "delivered by a renewed request, not by a late rescue")
}

// A consumer deleted under a served Subscription (as NATS losing it, or
// the reconciler recreating it) ends its pull requests at once; once the
// consumer is back, its events are delivered again.
func TestDeletedConsumerIsPulledAgainOnceRecreated(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	s := sub("s", "fn")
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "before", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)

	require.NoError(t, jsstream.DeleteConsumer(context.Background(), b.js, b.streams.EventStream, stream.ConsumerName(s.Namespace, s.Name)))
	b.subscribe(s) // the same Subscription: the dispatcher keeps its worker, the consumer is new
	published := time.Now()
	b.publish("shop", "order.created.v1", "after", "")
	require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick)
	require.Equal(t, "after", k.deliveries()[1].header.Get("Ce-Id"))
	require.Less(t, k.deliveries()[1].at.Sub(published), time.Second, "the deletion was noticed at once, not when the old request expired")
}
