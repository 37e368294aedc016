package jsstream_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

func TestEnsureCreatesThenUpdates(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()

	require.NoError(t, jsstream.Ensure(ctx, js, c))
	require.NoError(t, jsstream.Ensure(ctx, js, c), "idempotent")

	s, err := js.Stream(ctx, c.EventStream)
	require.NoError(t, err)
	info := s.CachedInfo().Config
	assert.Equal(t, []string{"kyma.>", "kfn.replay.>"}, info.Subjects)
	assert.Equal(t, jetstream.InterestPolicy, info.Retention)
	assert.Equal(t, jetstream.DiscardNew, info.Discard)
	assert.Equal(t, jetstream.FileStorage, info.Storage)
	assert.Equal(t, 2*time.Minute, info.Duplicates)
	kv, err := js.KeyValue(ctx, "kfn-events-locks")
	require.NoError(t, err, "the lock bucket of package replay")
	status, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, stream.LockTTL, status.TTL(), "a dead holder's lock expires")
	assert.Equal(t, jetstream.MemoryStorage, status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Storage,
		"in memory with file-stored streams: moving them to another storage leaves the bucket as it is")

	c.MaxBytes = 1 << 20
	c.Duplicates = time.Minute
	require.NoError(t, jsstream.Ensure(ctx, js, c))
	s, err = js.Stream(ctx, c.EventStream)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), s.CachedInfo().Config.MaxBytes, "updated in place")
	assert.Equal(t, time.Minute, s.CachedInfo().Config.Duplicates)

	d, err := js.Stream(ctx, c.DeadLetterStream)
	require.NoError(t, err)
	assert.Equal(t, []string{"kfn.deadletter.>"}, d.CachedInfo().Config.Subjects)
	assert.Equal(t, jetstream.LimitsPolicy, d.CachedInfo().Config.Retention)
	assert.Equal(t, 7*24*time.Hour, d.CachedInfo().Config.MaxAge)

	bad := c
	bad.Storage = "tape"
	require.ErrorIs(t, jsstream.Ensure(ctx, js, bad), stream.ErrInvalidConfig)
}

// TestMoreThanAThousandSubscriptions: NATS 2.15 gives a stream that sets
// no consumer limit 1,000 consumers; kfn's event stream, including one an
// earlier kfn created without a limit, takes more.
func TestMoreThanAThousandSubscriptions(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	c.Storage = stream.StorageMemory
	old := jsstream.EventStreamConfig(c)
	old.MaxConsumers = 0
	_, err := js.CreateStream(ctx, old)
	require.NoError(t, err)

	require.NoError(t, jsstream.Ensure(ctx, js, c))
	s, err := js.Stream(ctx, c.EventStream)
	require.NoError(t, err)
	assert.Equal(t, stream.DefaultMaxConsumers, s.CachedInfo().Config.MaxConsumers, "updated in place")
	for i := range 1001 {
		name := "sub-" + strconv.Itoa(i)
		_, err := js.CreateConsumer(ctx, c.EventStream, jetstream.ConsumerConfig{
			Durable: name, FilterSubject: "kyma.test." + name, AckPolicy: jetstream.AckExplicitPolicy,
		})
		require.NoError(t, err, "consumer %d", i)
	}
}

func sub(name string, modify ...func(*v1alpha2.Subscription)) *v1alpha2.Subscription {
	s := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha2.SubscriptionSpec{
			Sink:   "http://fn.default.svc.cluster.local",
			Source: "shop",
			Types:  []string{"order.created.v1", "order.paid.v1"},
		},
	}
	for _, m := range modify {
		m(s)
	}
	return s
}

func TestConsumerConfig(t *testing.T) {
	cfg, err := jsstream.ConsumerConfig(sub("orders", func(s *v1alpha2.Subscription) {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "3"}
	}), stream.ConsumerSettings{})
	require.NoError(t, err)
	name := stream.ConsumerName("default", "orders")
	assert.Equal(t, name, cfg.Durable)
	assert.Equal(t, []string{"kyma.shop.order.created.v1", "kyma.shop.order.paid.v1"}, cfg.FilterSubjects,
		"the replay subject is added only for replays (package replay)")
	assert.Equal(t, 3, cfg.MaxAckPending)
	assert.Equal(t, -1, cfg.MaxDeliver, "the dispatcher counts attempts, JetStream never drops")
	assert.Equal(t, jetstream.AckExplicitPolicy, cfg.AckPolicy)
	assert.Equal(t, jetstream.DeliverNewPolicy, cfg.DeliverPolicy)
	assert.Equal(t, stream.DefaultAckWait, cfg.AckWait)
	assert.Equal(t, map[string]string{stream.MetadataNamespace: "default", stream.MetadataSubscription: "orders"}, cfg.Metadata)

	cfg, err = jsstream.ConsumerConfig(sub("x"), stream.ConsumerSettings{AckWait: time.Second})
	require.NoError(t, err)
	assert.Equal(t, 10, cfg.MaxAckPending, "Kyma's default")
	assert.Equal(t, time.Second, cfg.AckWait)

	operator := v1alpha2.DefaultDelivery()
	operator.MaxInFlight = 25
	cfg, err = jsstream.ConsumerConfig(sub("x"), stream.ConsumerSettings{Defaults: operator})
	require.NoError(t, err)
	assert.Equal(t, 25, cfg.MaxAckPending, "the operator's default when spec.config does not set it")

	assert.Equal(t, jetstream.PriorityPolicyNone, cfg.PriorityPolicy, "not ordered: every replica pulls")
	assert.Empty(t, cfg.PriorityGroups)

	ordered := sub("ordered", func(s *v1alpha2.Subscription) {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "4", "ordering": "partitionkey"}
	})
	cfg, err = jsstream.ConsumerConfig(ordered, stream.ConsumerSettings{})
	require.NoError(t, err)
	assert.Equal(t, jetstream.PriorityPolicyPinned, cfg.PriorityPolicy, "one replica at a time")
	assert.Equal(t, []string{stream.PriorityGroup}, cfg.PriorityGroups)
	assert.Equal(t, stream.PinnedTTL, cfg.PinnedTTL)
	assert.Equal(t, 4*v1alpha2.OrderedAckPendingFactor, cfg.MaxAckPending, "events wait behind their keys")
	cfg, err = jsstream.ConsumerConfig(ordered, stream.ConsumerSettings{PinnedTTL: time.Second})
	require.NoError(t, err)
	assert.Equal(t, time.Second, cfg.PinnedTTL)

	_, err = jsstream.ConsumerConfig(sub("bad", func(s *v1alpha2.Subscription) {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "0"}
	}), stream.ConsumerSettings{})
	require.ErrorIs(t, err, v1alpha2.ErrInvalidConfig)
	_, err = jsstream.ConsumerConfig(sub("bad", func(s *v1alpha2.Subscription) { s.Spec.Types = []string{"a..b"} }), stream.ConsumerSettings{})
	require.ErrorIs(t, err, v1alpha2.ErrInvalidEventType)
}

func TestEnsureAndDeleteConsumer(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	require.NoError(t, jsstream.Ensure(ctx, js, c))

	s := sub("orders")
	cfg, err := jsstream.ConsumerConfig(s, stream.ConsumerSettings{})
	require.NoError(t, err)
	_, err = jsstream.EnsureConsumer(ctx, js, c.EventStream, cfg)
	require.NoError(t, err)

	s.Spec.Types = []string{"order.shipped.v1"}
	s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "1"}
	cfg, err = jsstream.ConsumerConfig(s, stream.ConsumerSettings{})
	require.NoError(t, err)
	cons, err := jsstream.EnsureConsumer(ctx, js, c.EventStream, cfg)
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, info.Config.MaxAckPending, "updated in place")
	assert.Contains(t, info.Config.FilterSubjects, "kyma.shop.order.shipped.v1")

	// Ordered and back, in place: the consumer keeps its position (the
	// event waiting for it).
	_, err = js.Publish(ctx, "kyma.shop.order.shipped.v1", []byte("waiting"))
	require.NoError(t, err)
	ordering := func(value string) *jetstream.ConsumerInfo {
		t.Helper()
		s.Spec.Config["ordering"] = v1alpha2.ConfigValue(value)
		cfg, err = jsstream.ConsumerConfig(s, stream.ConsumerSettings{})
		require.NoError(t, err)
		cons, err := jsstream.EnsureConsumer(ctx, js, c.EventStream, cfg)
		require.NoError(t, err)
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), info.NumPending, "the event still waits")
		return info
	}
	info = ordering("partitionkey")
	assert.Equal(t, jetstream.PriorityPolicyPinned, info.Config.PriorityPolicy, "ordered in place")
	assert.Equal(t, v1alpha2.OrderedAckPendingFactor, info.Config.MaxAckPending)
	info = ordering("none")
	assert.Equal(t, jetstream.PriorityPolicyNone, info.Config.PriorityPolicy, "unordered in place")

	require.NoError(t, jsstream.DeleteConsumer(ctx, js, c.EventStream, cfg.Durable))
	require.NoError(t, jsstream.DeleteConsumer(ctx, js, c.EventStream, cfg.Durable), "already gone is fine")
	require.NoError(t, jsstream.DeleteConsumer(ctx, js, "no-such-stream", cfg.Durable))
	_, err = js.Consumer(ctx, c.EventStream, cfg.Durable)
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)

	_, err = jsstream.EnsureConsumer(ctx, js, "no-such-stream", cfg)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
}

// TestEnsureMovesReplicasInPlace: on a 3-server JetStream cluster, streams
// and the lock bucket made with one replica (profile small) are moved to
// three (profile ha) by Ensure with Replicas 3, keeping every stored event;
// and back to one.
func TestEnsureMovesReplicasInPlace(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	js := c.JetStream(t)
	ctx := context.Background()
	cfg := stream.DefaultConfig()
	require.Eventually(t, func() bool { return jsstream.Ensure(ctx, js, cfg) == nil }, 30*time.Second, 50*time.Millisecond, "R1 streams made")
	for range 5 {
		_, err := js.Publish(ctx, "kfn.deadletter.ns.default", []byte(`{}`))
		require.NoError(t, err)
	}
	replicas := func(name string) (int, uint64) {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		return s.CachedInfo().Config.Replicas, s.CachedInfo().State.Msgs
	}
	lockStream := "KV_" + cfg.LockBucket()

	cfg.Replicas = 3
	require.NoError(t, jsstream.Ensure(ctx, js, cfg))
	for _, name := range []string{cfg.EventStream, cfg.DeadLetterStream, lockStream} {
		n, _ := replicas(name)
		assert.Equal(t, 3, n, "%s on three servers", name)
	}
	require.Eventually(t, func() bool {
		s, err := js.Stream(ctx, cfg.DeadLetterStream)
		if err != nil {
			return false
		}
		info := s.CachedInfo()
		current := 0
		for _, r := range info.Cluster.Replicas {
			if r.Current {
				current++
			}
		}
		return info.State.Msgs == 5 && current == 2
	}, 30*time.Second, 50*time.Millisecond, "the dead letters are kept and copied to the two new replicas")

	cfg.Replicas = 1
	require.NoError(t, jsstream.Ensure(ctx, js, cfg))
	n, msgs := replicas(cfg.DeadLetterStream)
	assert.Equal(t, 1, n)
	assert.Equal(t, uint64(5), msgs)
}
