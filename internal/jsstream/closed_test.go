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

// TestAClosedEventStreamTakesNoEventUntilOpened: EnsureClosed makes a
// missing event stream without the event subjects, so that a publish is
// refused (no stream answers), not acknowledged and dropped for want of a
// consumer; Ensure, from any replica, leaves it closed; Open opens it,
// and Ensure then leaves it open. An existing open stream is never
// closed.
func TestAClosedEventStreamTakesNoEventUntilOpened(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	publish := func() error {
		_, err := js.Publish(ctx, "kyma.shop.order.created.v1", []byte(`{}`))
		return err
	}

	open, err := jsstream.EnsureClosed(ctx, js, c)
	require.NoError(t, err)
	assert.False(t, open, "made closed")
	require.ErrorIs(t, publish(), jetstream.ErrNoStreamResponse, "refused, not acknowledged")
	require.NoError(t, jsstream.Ensure(ctx, js, c))
	open, err = jsstream.EventStreamOpen(ctx, js, c)
	require.NoError(t, err)
	assert.False(t, open, "Ensure leaves it closed")
	open, err = jsstream.EnsureClosed(ctx, js, c)
	require.NoError(t, err)
	assert.False(t, open, "EnsureClosed too")
	require.ErrorIs(t, publish(), jetstream.ErrNoStreamResponse)

	_, err = js.CreateConsumer(ctx, c.EventStream, jetstream.ConsumerConfig{
		Durable: "orders", FilterSubject: "kyma.shop.order.created.v1", AckPolicy: jetstream.AckExplicitPolicy,
	})
	require.NoError(t, err, "a consumer is made in a closed stream")
	require.NoError(t, jsstream.Open(ctx, js, c))
	require.NoError(t, publish())
	s, err := js.Stream(ctx, c.EventStream)
	require.NoError(t, err)
	assert.ElementsMatch(t, jsstream.EventStreamConfig(c).Subjects, s.CachedInfo().Config.Subjects)
	assert.Equal(t, uint64(1), s.CachedInfo().State.Msgs, "kept for the consumer")

	open, err = jsstream.EnsureClosed(ctx, js, c)
	require.NoError(t, err)
	assert.True(t, open, "an open stream stays open")
	require.NoError(t, publish())
}

// TestEnsureMakesAMissingEventStreamOpen: without an opener (tests,
// benchmarks, a bridge that makes no consumers), Ensure makes the stream
// open, as before.
func TestEnsureMakesAMissingEventStreamOpen(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	require.NoError(t, jsstream.Ensure(ctx, js, c))
	open, err := jsstream.EventStreamOpen(ctx, js, c)
	require.NoError(t, err)
	assert.True(t, open)
	require.NoError(t, js.DeleteStream(ctx, c.EventStream))
	_, err = jsstream.EventStreamOpen(ctx, js, c)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	require.ErrorIs(t, jsstream.Open(ctx, js, c), jetstream.ErrStreamNotFound)
}

// TestPartitionsStoreEventsUnderTheirEventSubject: each partition's
// stream takes what is published with its prefix and stores it under the
// event subject, so that one consumer name and filter serve every
// partition; partitions are closed, opened and made again one by one, a
// partition made anew closed while the others stay open.
func TestPartitionsStoreEventsUnderTheirEventSubject(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	c.Partitions = 3
	const subject = "kyma.shop.order.created.v1"
	publish := func(p int, subject string) (*jetstream.PubAck, error) {
		return js.Publish(ctx, stream.PublishSubject(p, subject), []byte(`{}`))
	}

	open, err := jsstream.EnsureClosed(ctx, js, c)
	require.NoError(t, err)
	assert.False(t, open)
	for p := range 3 {
		_, err := publish(p, subject)
		require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "partition %d made closed", p)
		_, err = js.CreateConsumer(ctx, c.PartitionStream(p), jetstream.ConsumerConfig{
			Durable: "orders", FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy,
		})
		require.NoError(t, err)
	}
	require.NoError(t, jsstream.Open(ctx, js, c))
	for p := range 3 {
		ack, err := publish(p, subject)
		require.NoError(t, err)
		assert.Equal(t, c.PartitionStream(p), ack.Stream)
		_, err = publish(p, "kyma.shop.nobody.wants.this")
		require.NoError(t, err, "acknowledged")

		cons, err := js.Consumer(ctx, c.PartitionStream(p), "orders")
		require.NoError(t, err)
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		assert.Equal(t, subject, msg.Subject(), "partition %d stores the event subject", p)
		s, err := js.Stream(ctx, c.PartitionStream(p))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), s.CachedInfo().State.Msgs, "partition %d keeps only what a consumer wants", p)
	}

	require.NoError(t, js.DeleteStream(ctx, c.PartitionStream(1)))
	_, err = jsstream.EventStreamOpen(ctx, js, c)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "one partition missing")
	fewer, err := jsstream.FewerReplicas(ctx, js, c)
	require.NoError(t, err)
	assert.True(t, fewer, "Ensure must make the missing partition")
	open, err = jsstream.EnsureClosed(ctx, js, c)
	require.NoError(t, err)
	assert.False(t, open, "the partition made anew is closed")
	_, err = publish(1, subject)
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse)
	_, err = publish(2, subject)
	require.NoError(t, err, "the others stay open")
}
