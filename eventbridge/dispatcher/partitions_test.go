package dispatcher_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
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
