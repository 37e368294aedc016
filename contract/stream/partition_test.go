package stream_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kfn-dev/kfn/contract/stream"
)

// TestPartitionZeroIsTheEventStream: one partition is the layout of every
// release before partitions, and partition 0 keeps it with more.
func TestPartitionZeroIsTheEventStream(t *testing.T) {
	c := stream.DefaultConfig()
	assert.Equal(t, 1, c.PartitionCount())
	assert.Equal(t, []string{"kfn-events"}, c.PartitionStreams())
	assert.Equal(t, stream.EventSubjects(), stream.PartitionSubjects(0))
	assert.Equal(t, "kyma.shop.order.created.v1", stream.PublishSubject(0, "kyma.shop.order.created.v1"))
	assert.Equal(t, 0, c.PartitionOf("kyma.shop.order.created.v1", "order-7"))

	c.Partitions = 3
	assert.Equal(t, []string{"kfn-events", "kfn-events-1", "kfn-events-2"}, c.PartitionStreams())
	assert.Equal(t, []string{"kfn.p.2.>"}, stream.PartitionSubjects(2))
	assert.Equal(t, "kfn.p.2.kyma.shop.order.created.v1", stream.PublishSubject(2, "kyma.shop.order.created.v1"))
	assert.Len(t, stream.PublishSubject(stream.MaxPartitions-1, ""), stream.MaxPublishPrefixLength)
}

// TestPartitionOf: an event's partition is fixed by its key, or its
// subject without one, and keys spread over every partition.
func TestPartitionOf(t *testing.T) {
	c := stream.DefaultConfig()
	c.Partitions = 4
	// Fixed values: a change moves every key of every cluster to another
	// stream (order per key and de-duplication hold within a stream only).
	assert.Equal(t, 2, c.PartitionOf("kyma.shop.order.created.v1", ""))
	assert.Equal(t, 3, c.PartitionOf("kyma.shop.order.created.v1", "order-7"))
	assert.Equal(t, c.PartitionOf("kyma.other.type", "order-7"), c.PartitionOf("kyma.shop.order.created.v1", "order-7"), "the key decides, not the type")
	assert.Equal(t, c.PartitionOf("order-7", ""), c.PartitionOf("kyma.x.y", "order-7"), "a key is hashed as a subject is")

	counts := make([]int, c.Partitions)
	for i := range 4000 {
		counts[c.PartitionOf("kyma.shop.t", fmt.Sprintf("order-%d", i))]++
	}
	for p, n := range counts {
		assert.InDelta(t, 1000, n, 100, "partition %d of 4,000 keys: %v", p, counts)
	}
	for p := range stream.MaxPartitions {
		assert.True(t, strings.HasPrefix(stream.PublishSubject(p, "kyma.a.b"), strings.TrimSuffix(stream.PartitionSubjects(p)[0], ">")),
			"partition %d takes what is published to it", p)
	}
}

func TestPartitionNumber(t *testing.T) {
	c := stream.DefaultConfig()
	for name, want := range map[string]int{"kfn-events": 0, "kfn-events-1": 1, "kfn-events-15": 15} {
		p, ok := c.PartitionNumber(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, p, name)
	}
	for _, name := range []string{"kfn-events-0", "kfn-events-16", "kfn-events-01", "kfn-events-x", "kfn-events-", "kfn-eventsx1", "kfn-deadletters", "kfn-events-1-1", "kfn-events-+1"} {
		_, ok := c.PartitionNumber(name)
		assert.False(t, ok, name)
	}
}
