package stream_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/stream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestDeadLetterNamespaceBytes: a 16th of the dead-letter stream by
// default, at least one event of the largest size and at most the stream.
func TestDeadLetterNamespaceBytes(t *testing.T) {
	tests := map[string]struct {
		modify func(*stream.Config)
		want   int64
	}{
		"default":               {modify: func(*stream.Config) {}, want: 16 << 20},
		"set":                   {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = 3 << 20 }, want: 3 << 20},
		"a small stream":        {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = 8 << 20 }, want: 2 << 20},
		"smaller than an event": {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = 1 << 20 }, want: 1 << 20},
		"unlimited":             {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = -1 }, want: 16 << 20},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := stream.DefaultConfig()
			tt.modify(&c)
			require.NoError(t, c.Validate())
			assert.Equal(t, tt.want, c.DeadLetterNamespaceBytes())
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		modify  func(*stream.Config)
		wantErr string
	}{
		"defaults":            {modify: func(*stream.Config) {}},
		"memory":              {modify: func(c *stream.Config) { c.Storage = stream.StorageMemory }},
		"unlimited":           {modify: func(c *stream.Config) { c.MaxBytes, c.MaxMsgSize, c.DeadLetterMaxBytes = -1, -1, -1 }},
		"empty name":          {modify: func(c *stream.Config) { c.EventStream = "" }, wantErr: "event stream name"},
		"dot in name":         {modify: func(c *stream.Config) { c.DeadLetterStream = "a.b" }, wantErr: "dead-letter stream name"},
		"no bucket name":      {modify: func(c *stream.Config) { c.EventStream = "kfn:events" }, wantErr: `names the lock bucket "kfn:events-locks"`},
		"same names":          {modify: func(c *stream.Config) { c.DeadLetterStream = c.EventStream }, wantErr: "different names"},
		"bad storage":         {modify: func(c *stream.Config) { c.Storage = "disk" }, wantErr: `storage must be "file" or "memory", not "disk"`},
		"zero replicas":       {modify: func(c *stream.Config) { c.Replicas = 0 }, wantErr: "replicas must be between 1 and 5"},
		"zero bytes":          {modify: func(c *stream.Config) { c.MaxBytes = 0 }, wantErr: "max bytes must be positive"},
		"zero msg size":       {modify: func(c *stream.Config) { c.MaxMsgSize = 0 }, wantErr: "max message size"},
		"zero consumers":      {modify: func(c *stream.Config) { c.MaxConsumers = 0 }, wantErr: "max consumers (Subscriptions) must be positive"},
		"unlimited consumers": {modify: func(c *stream.Config) { c.MaxConsumers = -1 }, wantErr: "the server's default, 1,000"},
		"no dedup window":     {modify: func(c *stream.Config) { c.Duplicates = 0 }, wantErr: "de-duplication window"},
		"negative dead age":   {modify: func(c *stream.Config) { c.DeadLetterMaxAge = -time.Second }, wantErr: "dead-letter max age"},
		"zero dead bytes":     {modify: func(c *stream.Config) { c.DeadLetterMaxBytes = 0 }, wantErr: "dead-letter max bytes"},
		"dead bytes per namespace over the stream": {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = c.DeadLetterMaxBytes + 1 }, wantErr: "must not be above the dead-letter stream's"},
		"dead bytes per namespace below an event":  {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = int64(c.MaxMsgSize) - 1 }, wantErr: "must hold one event of the largest size"},
		"negative dead bytes per namespace":        {modify: func(c *stream.Config) { c.DeadLetterMaxBytesPerNamespace = -1 }, wantErr: "dead-letter bytes per namespace must be positive"},
		"no dependency bucket":                     {modify: func(c *stream.Config) { c.DependencyBucket = "" }, wantErr: "dependency bucket name"},
		"dependency bucket dot":                    {modify: func(c *stream.Config) { c.DependencyBucket = "kfn.deps" }, wantErr: "dependency bucket name"},
		"zero dependency bytes":                    {modify: func(c *stream.Config) { c.DependencyMaxBytes = 0 }, wantErr: "dependency bucket max bytes"},
		"unlimited dependencies":                   {modify: func(c *stream.Config) { c.DependencyMaxBytes = -1 }},
		"dependencies forever":                     {modify: func(c *stream.Config) { c.DependencyMaxAge = 0 }},
		"negative dependency age":                  {modify: func(c *stream.Config) { c.DependencyMaxAge = -time.Second }, wantErr: "dependency max age"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := stream.DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, stream.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestEnsureCreatesThenUpdates(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()

	require.NoError(t, stream.Ensure(ctx, js, c))
	require.NoError(t, stream.Ensure(ctx, js, c), "idempotent")

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
	require.NoError(t, stream.Ensure(ctx, js, c))
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
	require.ErrorIs(t, stream.Ensure(ctx, js, bad), stream.ErrInvalidConfig)
}

// TestMoreThanAThousandSubscriptions: NATS 2.15 gives a stream that sets
// no consumer limit 1,000 consumers; kfn's event stream, including one an
// earlier kfn created without a limit, takes more.
func TestMoreThanAThousandSubscriptions(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	c.Storage = stream.StorageMemory
	old := c.EventStreamConfig()
	old.MaxConsumers = 0
	_, err := js.CreateStream(ctx, old)
	require.NoError(t, err)

	require.NoError(t, stream.Ensure(ctx, js, c))
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

func TestConsumerName(t *testing.T) {
	a := stream.ConsumerName("default", "orders")
	assert.Equal(t, a, stream.ConsumerName("default", "orders"), "deterministic")
	assert.Regexp(t, regexp.MustCompile(`^kfn-[0-9a-f]{40}$`), a)
	assert.NotEqual(t, a, stream.ConsumerName("default", "orders2"))
	assert.NotEqual(t, stream.ConsumerName("a", "b-c"), stream.ConsumerName("a-b", "c"))
	// A fixed value: changing the scheme orphans every consumer in every cluster.
	assert.Equal(t, "kfn-962fc807ee8f6dd9d4b7a820d5eef64fd99fb91f", stream.ConsumerName("default", "orders"))
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
	cfg, err := stream.ConsumerConfig(sub("orders", func(s *v1alpha2.Subscription) {
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

	cfg, err = stream.ConsumerConfig(sub("x"), stream.ConsumerSettings{AckWait: time.Second})
	require.NoError(t, err)
	assert.Equal(t, 10, cfg.MaxAckPending, "Kyma's default")
	assert.Equal(t, time.Second, cfg.AckWait)

	operator := v1alpha2.DefaultDelivery()
	operator.MaxInFlight = 25
	cfg, err = stream.ConsumerConfig(sub("x"), stream.ConsumerSettings{Defaults: operator})
	require.NoError(t, err)
	assert.Equal(t, 25, cfg.MaxAckPending, "the operator's default when spec.config does not set it")

	_, err = stream.ConsumerConfig(sub("bad", func(s *v1alpha2.Subscription) {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "0"}
	}), stream.ConsumerSettings{})
	require.ErrorIs(t, err, v1alpha2.ErrInvalidConfig)
	_, err = stream.ConsumerConfig(sub("bad", func(s *v1alpha2.Subscription) { s.Spec.Types = []string{"a..b"} }), stream.ConsumerSettings{})
	require.ErrorIs(t, err, v1alpha2.ErrInvalidEventType)
}

func TestEnsureAndDeleteConsumer(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	c := stream.DefaultConfig()
	require.NoError(t, stream.Ensure(ctx, js, c))

	s := sub("orders")
	cfg, err := stream.ConsumerConfig(s, stream.ConsumerSettings{})
	require.NoError(t, err)
	_, err = stream.EnsureConsumer(ctx, js, c.EventStream, cfg)
	require.NoError(t, err)

	s.Spec.Types = []string{"order.shipped.v1"}
	s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "1"}
	cfg, err = stream.ConsumerConfig(s, stream.ConsumerSettings{})
	require.NoError(t, err)
	cons, err := stream.EnsureConsumer(ctx, js, c.EventStream, cfg)
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, info.Config.MaxAckPending, "updated in place")
	assert.Contains(t, info.Config.FilterSubjects, "kyma.shop.order.shipped.v1")

	require.NoError(t, stream.DeleteConsumer(ctx, js, c.EventStream, cfg.Durable))
	require.NoError(t, stream.DeleteConsumer(ctx, js, c.EventStream, cfg.Durable), "already gone is fine")
	require.NoError(t, stream.DeleteConsumer(ctx, js, "no-such-stream", cfg.Durable))
	_, err = js.Consumer(ctx, c.EventStream, cfg.Durable)
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)

	_, err = stream.EnsureConsumer(ctx, js, "no-such-stream", cfg)
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
	require.Eventually(t, func() bool { return stream.Ensure(ctx, js, cfg) == nil }, 30*time.Second, 50*time.Millisecond, "R1 streams made")
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
	require.NoError(t, stream.Ensure(ctx, js, cfg))
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
	require.NoError(t, stream.Ensure(ctx, js, cfg))
	n, msgs := replicas(cfg.DeadLetterStream)
	assert.Equal(t, 1, n)
	assert.Equal(t, uint64(5), msgs)
}
