package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestEventsGoToTheirPartition: a Store of the event stream's partitions
// stores each new event in the partition of its partitionkey (or, without
// one, of its event subject), under its event subject, where one
// published again is a duplicate; a replay goes to partition 0.
func TestEventsGoToTheirPartition(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	sc := stream.DefaultConfig()
	sc.Storage, sc.Partitions = stream.StorageMemory, 4
	require.NoError(t, jsstream.Ensure(ctx, js, sc))
	stored := map[string]int{} // partition's stream -> events stored in it
	for _, name := range sc.PartitionStreams() {
		_, err := js.CreateConsumer(ctx, name, jsstreamConsumer("all"))
		require.NoError(t, err)
	}
	store := eventstore.ForEventStream(js, sc)
	put := func(id, eventType, key string) eventstore.Result {
		e := event.New()
		e.SetID(id)
		e.SetSource("shop")
		e.SetType(eventType)
		if key != "" {
			e.SetExtension(eventstore.PartitionKeyExtension, key)
		}
		enc, err := eventstore.Encode(&e, "", "")
		require.NoError(t, err)
		res, err := store.Put(ctx, enc)
		require.NoError(t, err)
		return res
	}
	partitionOf := func(eventType, key string) string {
		return sc.PartitionStream(sc.PartitionOf("kyma.shop."+eventType, key))
	}
	want := map[string]int{}
	for i := range 40 {
		key := fmt.Sprintf("order-%d", i)
		put(key+"-a", "order.created.v1", key)
		put(key+"-b", "order.paid.v1", key)
		want[partitionOf("order.created.v1", key)] += 2
	}
	assert.Len(t, want, 4, "keys spread over every partition")
	for _, name := range sc.PartitionStreams() {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		info, err := s.Info(ctx, jsstreamSubjects())
		require.NoError(t, err)
		for subject, n := range info.State.Subjects {
			assert.Contains(t, []string{"kyma.shop.order.created.v1", "kyma.shop.order.paid.v1"}, subject, "stored under the event subject")
			stored[name] += int(n)
		}
	}
	assert.Equal(t, want, stored, "each event in its key's partition, whatever its type")

	assert.True(t, put("order-3-a", "order.created.v1", "order-3").Duplicate, "published again: stored once, in its partition")
	put("unkeyed", "order.shipped.v1", "")
	s, err := js.Stream(ctx, partitionOf("order.shipped.v1", ""))
	require.NoError(t, err)
	info, err := s.Info(ctx, jsstreamSubjects())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Subjects["kyma.shop.order.shipped.v1"], "without a key, the partition of its subject")

	replay := &nats.Msg{Subject: stream.ReplaySubject("all"), Header: nats.Header{"ce-id": {"r"}}, Data: []byte("{}")}
	res, err := store.Put(ctx, eventstore.Restore(replay, "replay-1"))
	require.NoError(t, err)
	assert.NotZero(t, res.Sequence)
	s, err = js.Stream(ctx, sc.EventStream)
	require.NoError(t, err)
	info, err = s.Info(ctx, jsstreamSubjects())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Subjects[stream.ReplaySubject("all")], "a replay in partition 0")
}

// TestAnEventOfAClosedPartitionGoesToPartitionZero: while the stream of
// an event's partition takes no event (closed while it is added, or taken
// away and drained), the event is stored in partition 0 and acknowledged.
func TestAnEventOfAClosedPartitionGoesToPartitionZero(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	sc := stream.DefaultConfig()
	sc.Storage, sc.Partitions = stream.StorageMemory, 2
	require.NoError(t, jsstream.Ensure(ctx, js, sc))
	for _, name := range sc.PartitionStreams() {
		_, err := js.CreateConsumer(ctx, name, jsstreamConsumer("all"))
		require.NoError(t, err)
	}
	_, err := js.UpdateStream(ctx, jsstream.ClosedPartitionConfig(sc, 1))
	require.NoError(t, err)
	key := ""
	for i := 0; key == ""; i++ {
		if sc.PartitionOf("kyma.shop.order.created.v1", fmt.Sprint(i)) == 1 {
			key = fmt.Sprint(i)
		}
	}
	e := event.New()
	e.SetID("closed-1")
	e.SetSource("shop")
	e.SetType("order.created.v1")
	e.SetExtension(eventstore.PartitionKeyExtension, key)
	enc, err := eventstore.Encode(&e, "", "")
	require.NoError(t, err)
	_, err = eventstore.ForEventStream(js, sc).Put(ctx, enc)
	require.NoError(t, err)
	for p, want := range []uint64{1, 0} {
		s, err := js.Stream(ctx, sc.PartitionStream(p))
		require.NoError(t, err)
		assert.Equal(t, want, s.CachedInfo().State.Msgs, "partition %d", p)
	}
}

// jsstreamConsumer is a consumer of every event and replay subject, so
// that interest retention keeps what the test stores.
func jsstreamConsumer(name string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubjects: []string{"kyma.>", stream.ReplaySubject(name)}}
}

// jsstreamSubjects asks a stream's info for its subjects' counts.
func jsstreamSubjects() jetstream.StreamInfoOpt { return jetstream.WithSubjectFilter(">") }

// TestStoredInItsStreamAlone: an event is stored in its stream with its
// own headers and JetStream's message id, and nothing naming the stream
// (it would be read at every delivery); one that a stream not kfn's took
// (made while kfn's was missing: JetStream lets no two streams take one
// subject) is an error that names both streams.
func TestStoredInItsStreamAlone(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	encode := func(id string) eventstore.Event {
		e := event.New()
		e.SetID(id)
		e.SetSource("shop")
		e.SetType("order.created.v1")
		enc, err := eventstore.Encode(&e, "", "")
		require.NoError(t, err)
		return enc
	}

	other, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "other", Subjects: []string{"kyma.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	_, err = eventstore.ForEventStream(js, sc).Put(ctx, encode("e-1"))
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	assert.ErrorContains(t, err, "stored in stream other, not "+sc.EventStream)
	require.NoError(t, js.DeleteStream(ctx, other.CachedInfo().Config.Name))

	require.NoError(t, jsstream.Ensure(ctx, js, sc))
	c, err := js.CreateConsumer(ctx, sc.EventStream, jsstreamConsumer("all")) // interest retention: kept for it
	require.NoError(t, err)
	res, err := eventstore.ForEventStream(js, sc).Put(ctx, encode("e-2"))
	require.NoError(t, err)
	assert.Equal(t, sc.EventStream, res.Stream)
	m, err := c.Next()
	require.NoError(t, err)
	var names []string
	for k := range m.Headers() {
		names = append(names, k)
	}
	assert.ElementsMatch(t, []string{"ce-specversion", "ce-id", "ce-source", "ce-type", "Nats-Msg-Id"}, names)
}
