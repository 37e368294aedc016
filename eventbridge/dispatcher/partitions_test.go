package dispatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// TestEveryPartitionIsDelivered: with the events of a Subscription spread
// over three partitions (by their partition keys), every one is delivered
// once, an event given up in a partition above 0 is a dead letter that
// names its partition, and a Subscription removed leaves no worker in any
// partition.
func TestEveryPartitionIsDelivered(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.Streams.Partitions = 3 }))
	k := b.newSink("fn", func(_ int, r *http.Request, w http.ResponseWriter) {
		if strings.HasPrefix(r.Header.Get("Ce-Id"), "poison-") {
			w.WriteHeader(http.StatusBadRequest) // given up at once
		}
	})
	s := sub("spread", "fn")
	b.subscribe(s)
	const events = 60
	partitions := map[int]bool{}
	for i := range events {
		key := fmt.Sprintf("order-%d", i)
		b.publishKeyed(key, 0)
		partitions[b.streams.PartitionOf("kyma.shop.order.created.v1", key)] = true
	}
	require.Len(t, partitions, 3, "the keys are in every partition")
	require.Eventually(t, func() bool { return k.count() == events }, wait, tick)
	require.Eventually(t, func() bool { return b.waiting(s) == 0 }, wait, tick, "all acknowledged")
	ids := map[string]int{}
	for _, d := range k.deliveries() {
		ids[d.header.Get("Ce-Id")]++
	}
	assert.Len(t, ids, events, "each event once")

	// A poison event in a partition above 0.
	key := ""
	for i := 0; key == ""; i++ {
		if b.streams.PartitionOf("kyma.shop.order.created.v1", fmt.Sprintf("poison-%d", i)) == 2 {
			key = fmt.Sprintf("poison-%d", i)
		}
	}
	b.publishKeyed(key, 0)
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)
	assert.Equal(t, b.streams.PartitionStream(2), b.deadLetters()[0].Headers().Get(deadletter.HeaderStream))

	b.d.Remove(s.Namespace, s.Name)
	assert.False(t, b.d.Serving(s.Namespace, s.Name))
	b.publish("shop", "order.created.v1", "after", "after")
	assert.Never(t, func() bool { return k.count() > events+1 }, 300*tick, tick, "no worker left in any partition")
}

// TestMaxInFlightHoldsAcrossPartitions: a Subscription's events spread
// over three partitions, each with a consumer handing out up to
// maxInFlightMessages, reach its sink at most maxInFlightMessages at once.
func TestMaxInFlightHoldsAcrossPartitions(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.Streams.Partitions = 3 }))
	release := make(chan struct{})
	k := b.newSink("fn", func(int, *http.Request, http.ResponseWriter) { <-release })
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the sink's server closes, should the test fail
	s := sub("spread", "fn", config(v1alpha2.ConfigMaxInFlightMessages, "2"))
	b.subscribe(s)
	partitions := map[int]bool{}
	for i := range 12 {
		key := fmt.Sprintf("order-%d", i)
		b.publishKeyed(key, 0)
		partitions[b.streams.PartitionOf("kyma.shop.order.created.v1", key)] = true
	}
	require.Len(t, partitions, 3)
	require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick)
	require.Never(t, func() bool { return k.maxInFlight() > 2 }, 300*time.Millisecond, tick, "never more than maxInFlightMessages over the partitions")
	free()
	require.Eventually(t, func() bool { return k.count() == 12 }, wait, tick)
	assert.Equal(t, 2, k.maxInFlight())
}

// TestPartitionsTakenAwayAreDeliveredUntilDrained: a dispatcher of one
// partition, started where an event bridge of three left events in each,
// delivers them all; an event published by a replica of three partitions
// once partitions 1 and 2 are closed (taken away) is stored in partition
// 0 and delivered; the drained partitions are deleted and nothing is
// delivered twice.
func TestPartitionsTakenAwayAreDeliveredUntilDrained(t *testing.T) {
	b := newBridge(t)
	ctx := context.Background()
	three := b.streams
	three.Partitions = 3
	require.NoError(t, jsstream.Ensure(ctx, b.js, three))
	k := b.newSink("fn", nil)
	s := sub("spread", "fn")
	cfg, err := jsstream.ConsumerConfig(s, stream.ConsumerSettings{AckWait: 2 * time.Second})
	require.NoError(t, err)
	for _, name := range three.PartitionStreams() {
		_, err := jsstream.EnsureConsumer(ctx, b.js, name, cfg)
		require.NoError(t, err)
	}
	old := eventstore.ForEventStream(b.js, three) // a replica of three partitions
	publish := func(key string) int {
		e := event.New()
		e.SetID(key)
		e.SetSource("shop")
		e.SetType("order.created.v1")
		e.SetExtension(eventstore.PartitionKeyExtension, key)
		_, err := put(ctx, old, &e, "", "")
		require.NoError(t, err)
		return three.PartitionOf("kyma.shop.order.created.v1", key)
	}
	partitions := map[int]bool{}
	for i := range 30 {
		partitions[publish(fmt.Sprintf("before-%d", i))] = true
	}
	require.Len(t, partitions, 3)

	require.NoError(t, b.d.Upsert(s))
	require.Eventually(t, func() bool { return k.count() == 30 }, wait, tick, "the partitions taken away are delivered")
	d, err := jsstream.DrainTakenAway(ctx, b.js, b.streams)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, d.Closed)
	for i := range 30 {
		publish(fmt.Sprintf("after-%d", i))
	}
	require.Eventually(t, func() bool { return k.count() == 60 }, wait, tick, "stored in partition 0 while the others are closed")
	require.Eventually(t, func() bool {
		_, err := jsstream.DrainTakenAway(ctx, b.js, b.streams)
		require.NoError(t, err)
		served, err := jsstream.ServedPartitions(ctx, b.js, b.streams)
		require.NoError(t, err)
		return len(served) == 1
	}, wait, tick, "deleted once drained")
	ids := map[string]int{}
	for _, d := range k.deliveries() {
		ids[d.header.Get("Ce-Id")]++
	}
	assert.Len(t, ids, 60, "each event once")
	b.publish("shop", "order.created.v1", "last", "last")
	require.Eventually(t, func() bool { return k.count() == 61 }, wait, tick)
}
