package replay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestApplyMakesTheConsumerInEveryPartition: a Subscription's consumer
// is one name in every partition, the replay subject in partition 0's
// only (replays are stored there); a consumer missing from an open
// partition is told as made anew (its events may be lost), one missing
// from a partition just added (closed, having taken nothing) is not.
func TestApplyMakesTheConsumerInEveryPartition(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	sc := stream.DefaultConfig()
	sc.Storage, sc.Partitions = stream.StorageMemory, 3
	require.NoError(t, jsstream.Ensure(ctx, js, sc))
	f := replay.Filters{JetStream: js, Streams: sc}
	filter := func(p int) []string {
		c, err := js.Consumer(ctx, sc.PartitionStream(p), "orders")
		require.NoError(t, err, "the consumer in partition %d", p)
		return c.CachedInfo().Config.FilterSubjects
	}

	created, err := f.Apply(ctx, config("orders", 10))
	require.NoError(t, err)
	assert.True(t, created)
	release, err := f.Hold(ctx, "orders")
	require.NoError(t, err)
	release()
	assert.Equal(t, []string{typeSubject, stream.ReplaySubject("orders")}, filter(0))
	for p := 1; p < 3; p++ {
		assert.Equal(t, []string{typeSubject}, filter(p), "partition %d", p)
	}
	created, err = f.Apply(ctx, config("orders", 20))
	require.NoError(t, err)
	assert.False(t, created)
	assert.Contains(t, filter(0), stream.ReplaySubject("orders"), "kept while replays may wait")
	c, err := js.Consumer(ctx, sc.PartitionStream(2), "orders")
	require.NoError(t, err)
	assert.Equal(t, 20, c.CachedInfo().Config.MaxAckPending, "updated in every partition")

	require.NoError(t, js.DeleteConsumer(ctx, sc.PartitionStream(2), "orders"))
	created, err = f.Apply(ctx, config("orders", 20))
	require.NoError(t, err)
	assert.True(t, created, "lost from an open partition")
	filter(2)

	more := sc
	more.Partitions = 4
	open, err := jsstream.EnsureClosed(ctx, js, more)
	require.NoError(t, err)
	require.False(t, open)
	created, err = replay.Filters{JetStream: js, Streams: more}.Apply(ctx, config("orders", 20))
	require.NoError(t, err)
	assert.False(t, created, "a partition added has lost nothing")
	assert.Equal(t, []string{typeSubject}, filter(3))
}
