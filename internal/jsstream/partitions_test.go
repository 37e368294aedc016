package jsstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestPartitionsTakenAwayAreDrainedThenDeleted: the count of partitions
// lowered from 3 to 1, partitions 1 and 2 are still served (their events
// counted); once the leader recorded the new count in partition 0 (by
// which a partition deleted so reads as taken away, not lost; a replica
// of the new count starting leaves the record as it is, and nothing is
// drained before), they are closed; the empty one is deleted at the next
// look, the other once its event is acknowledged.
func TestPartitionsTakenAwayAreDrainedThenDeleted(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	three := stream.DefaultConfig()
	three.Storage = stream.StorageMemory
	three.Partitions = 3
	one := three
	one.Partitions = 1
	const subject = "kyma.shop.order.created.v1"
	require.NoError(t, jsstream.Ensure(ctx, js, three))
	for p := range 3 {
		_, err := js.CreateConsumer(ctx, three.PartitionStream(p), jetstream.ConsumerConfig{
			Durable: "orders", FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy,
		})
		require.NoError(t, err)
	}
	_, err := js.Publish(ctx, stream.PublishSubject(2, subject), []byte(`{}`))
	require.NoError(t, err)
	away, err := jsstream.TakenAway(ctx, js, one, one.PartitionStream(2))
	require.NoError(t, err)
	assert.False(t, away, "partition 0 counts three partitions")

	require.NoError(t, jsstream.Ensure(ctx, js, one)) // an event bridge of one partition starts
	away, err = jsstream.TakenAway(ctx, js, one, one.PartitionStream(2))
	require.NoError(t, err)
	assert.False(t, away, "the leader's count is recorded, not a starting replica's")
	d, err := jsstream.DrainTakenAway(ctx, js, one)
	require.NoError(t, err)
	assert.Zero(t, d, "a leader drains only what partition 0 records as taken away")
	recorded, err := jsstream.RecordPartitions(ctx, js, one) // the leader is of one partition
	require.NoError(t, err)
	assert.True(t, recorded)
	recorded, err = jsstream.RecordPartitions(ctx, js, one)
	require.NoError(t, err)
	assert.False(t, recorded, "recorded already")
	served, err := jsstream.ServedPartitions(ctx, js, one)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, served, "the partitions taken away are served until they are drained")
	backlogs := jsstream.NewBacklogs(js, one)
	b, err := backlogs.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), b["orders"], "partition 2's event counts")
	for _, p := range []int{1, 2} {
		away, err := jsstream.TakenAway(ctx, js, one, one.PartitionStream(p))
		require.NoError(t, err)
		assert.True(t, away, "partition 0 counts one partition: %d is taken away", p)
	}
	away, err = jsstream.TakenAway(ctx, js, one, one.EventStream)
	require.NoError(t, err)
	assert.False(t, away, "partition 0 never is")

	d, err = jsstream.DrainTakenAway(ctx, js, one)
	require.NoError(t, err)
	assert.Equal(t, jsstream.Drained{Closed: []int{1, 2}}, d, "closed first, none deleted in the same look")
	_, err = js.Publish(ctx, stream.PublishSubject(2, subject), []byte(`{}`))
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "a closed partition takes no event")

	d, err = jsstream.DrainTakenAway(ctx, js, one)
	require.NoError(t, err)
	assert.Equal(t, jsstream.Drained{Deleted: []int{1}, Draining: []int{2}}, d, "the empty one is deleted; the other holds an event")
	d, err = jsstream.DrainTakenAway(ctx, js, one)
	require.NoError(t, err)
	assert.Equal(t, jsstream.Drained{Draining: []int{2}}, d)

	cons, err := js.Consumer(ctx, one.PartitionStream(2), "orders")
	require.NoError(t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.NoError(t, msg.DoubleAck(ctx))
	require.Eventually(t, func() bool {
		s, err := js.Stream(ctx, one.PartitionStream(2))
		return err == nil && s.CachedInfo().State.Msgs == 0
	}, 5*time.Second, 10*time.Millisecond, "interest retention drops the acknowledged event")
	d, err = jsstream.DrainTakenAway(ctx, js, one)
	require.NoError(t, err)
	assert.Equal(t, jsstream.Drained{Deleted: []int{2}}, d)
	served, err = jsstream.ServedPartitions(ctx, js, one)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, served)
	b, err = backlogs.Read(ctx)
	require.NoError(t, err, "a partition deleted since the last list of names counts nothing")
	assert.Zero(t, b["orders"])
}

func TestRecordedPartitions(t *testing.T) {
	c := stream.DefaultConfig()
	assert.Equal(t, 1, jsstream.RecordedPartitions(jetstream.StreamConfig{}), "made before partitions: one")
	for _, n := range []int{1, 3, 16} {
		c.Partitions = n
		assert.Equal(t, n, jsstream.RecordedPartitions(jsstream.EventStreamConfig(c)))
	}
	for _, bad := range []string{"", "x", "0", "-2"} {
		assert.Equal(t, 1, jsstream.RecordedPartitions(jetstream.StreamConfig{Metadata: map[string]string{jsstream.PartitionsMetadata: bad}}), bad)
	}
}

// TestPartitionWatchKeepsWhatItFoundForItsInterval: a partition made after
// a look is served once what the watch found is older than its interval
// (DefaultPartitionLook when none is given), not before.
func TestPartitionWatchKeepsWhatItFoundForItsInterval(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	one := stream.DefaultConfig()
	one.Storage = stream.StorageMemory
	two := one
	two.Partitions = 2
	require.NoError(t, jsstream.Ensure(ctx, js, one))

	byDefault := jsstream.NewPartitionWatch(js, one, 0)
	first := time.Now()
	served, err := byDefault.Served(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{0}, served)
	long := jsstream.NewPartitionWatch(js, one, time.Hour)
	served, err = long.Served(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{0}, served)
	short := jsstream.NewPartitionWatch(js, one, 10*time.Millisecond)
	served, err = short.Served(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{0}, served)

	require.NoError(t, jsstream.Ensure(ctx, js, two)) // partition 1 made by an event bridge of two
	served, err = byDefault.Served(ctx)
	require.NoError(t, err)
	if time.Since(first) < jsstream.DefaultPartitionLook {
		assert.Equal(t, []int{0}, served, "kept for DefaultPartitionLook")
	}
	served, err = long.Served(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, served, "kept for the hour")
	require.Eventually(t, func() bool {
		served, err := short.Served(ctx)
		return err == nil && len(served) == 2
	}, 5*time.Second, 5*time.Millisecond, "looked for again after 10 ms")
	streams, err := short.Streams(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"kfn-events", "kfn-events-1"}, streams)
}
