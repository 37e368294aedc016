package jsstream_test

import (
	"context"
	"testing"

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
