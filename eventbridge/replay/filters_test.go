package replay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

const (
	wait = 10 * time.Second
	tick = 10 * time.Millisecond

	typeSubject = "kyma.shop.order.created.v1"
)

type env struct {
	js      jetstream.JetStream
	streams stream.Config
	filters replay.Filters
}

func newEnv(t *testing.T) *env {
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	return &env{js: js, streams: sc, filters: replay.Filters{JetStream: js, Streams: sc}}
}

// config is the configuration the applier would give consumer name.
func config(name string, maxAckPending int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: maxAckPending,
		FilterSubjects: []string{typeSubject}}
}

func (e *env) filter(t *testing.T, name string) []string {
	t.Helper()
	c, err := e.js.Consumer(context.Background(), e.streams.EventStream, name)
	require.NoError(t, err)
	return c.CachedInfo().Config.FilterSubjects
}

// replay publishes data on the consumer's replay subject as the dead-letter
// admin does: between Hold and release.
func (e *env) replay(t *testing.T, name, data string) {
	t.Helper()
	release, err := e.filters.Hold(context.Background(), name)
	require.NoError(t, err)
	defer release()
	_, err = e.js.PublishMsg(context.Background(), &nats.Msg{Subject: stream.ReplaySubject(name), Data: []byte(data)})
	require.NoError(t, err)
}

// take fetches and acknowledges the next message of the consumer.
func (e *env) take(t *testing.T, name string) string {
	t.Helper()
	c, err := e.js.Consumer(context.Background(), e.streams.EventStream, name)
	require.NoError(t, err)
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	require.NoError(t, err)
	m := <-batch.Messages()
	require.NotNil(t, m, "a message for %s", name)
	require.NoError(t, m.DoubleAck(context.Background()))
	return string(m.Data())
}

func TestTheReplaySubjectIsInTheFilterOnlyWhileReplaysWait(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name := stream.ConsumerName("default", "a")
	other := stream.ConsumerName("default", "b")
	created, err := e.filters.Apply(ctx, config(name, 10))
	require.NoError(t, err)
	assert.True(t, created, "the consumer did not exist")
	created, err = e.filters.Apply(ctx, config(name, 10))
	require.NoError(t, err)
	assert.False(t, created, "the consumer existed")
	require.NoError(t, apply(e.filters, ctx, config(other, 10)))
	assert.Equal(t, []string{typeSubject}, e.filter(t, name), "one subject: JetStream's indexed path")

	e.replay(t, name, "replayed")
	assert.Equal(t, []string{typeSubject, stream.ReplaySubject(name)}, e.filter(t, name))
	assert.Equal(t, []string{typeSubject}, e.filter(t, other), "only the replayed-to consumer changes")

	n, err := e.filters.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a replayed event waits")
	assert.Contains(t, e.filter(t, name), stream.ReplaySubject(name))

	assert.Equal(t, "replayed", e.take(t, name))
	require.Eventually(t, func() bool {
		n, err := e.filters.Sweep(ctx)
		return err == nil && n == 1
	}, wait, tick, "the settled replay lets the sweep take the subject out")
	assert.Equal(t, []string{typeSubject}, e.filter(t, name))

	_, err = e.js.Publish(ctx, typeSubject, []byte("new"))
	require.NoError(t, err)
	assert.Equal(t, "new", e.take(t, name), "the consumer goes on with its events")
	n, err = e.filters.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to sweep")
}

func TestTheSweeperSweepsUntilItsContextEnds(t *testing.T) {
	e := newEnv(t)
	name := stream.ConsumerName("default", "a")
	require.NoError(t, apply(e.filters, context.Background(), config(name, 10)))
	e.replay(t, name, "replayed")
	assert.Equal(t, "replayed", e.take(t, name))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- replay.NewSweeper(e.filters, tick, nil).Run(ctx) }()
	require.Eventually(t, func() bool { return len(e.filter(t, name)) == 1 }, wait, tick,
		"a sweep takes the settled replay's subject out")
	assert.Equal(t, []string{typeSubject}, e.filter(t, name))
	select {
	case err := <-done:
		t.Fatalf("Run returned before its context ended: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "an ended context is no error")
	case <-time.After(wait):
		t.Fatal("Run goes on after its context ended")
	}
}

func TestApplyKeepsTheReplaySubjectOfWaitingReplays(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name := stream.ConsumerName("default", "a")
	require.NoError(t, apply(e.filters, ctx, config(name, 10)))
	e.replay(t, name, "replayed")

	require.NoError(t, apply(e.filters, ctx, config(name, 3)), "the Subscription changed while its replay waits")
	c, err := e.js.Consumer(ctx, e.streams.EventStream, name)
	require.NoError(t, err)
	assert.Equal(t, 3, c.CachedInfo().Config.MaxAckPending)
	assert.Equal(t, []string{typeSubject, stream.ReplaySubject(name)}, c.CachedInfo().Config.FilterSubjects)
	assert.Equal(t, "replayed", e.take(t, name), "the replay survived the update")
}

func TestHoldWithoutConsumer(t *testing.T) {
	e := newEnv(t)
	_, err := e.filters.Hold(context.Background(), stream.ConsumerName("default", "gone"))
	require.ErrorIs(t, err, replay.ErrNoConsumer)

	// The lock was given back: the consumer can be made at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, apply(e.filters, ctx, config(stream.ConsumerName("default", "gone"), 1)))
}

func TestTheLockMakesOthersWait(t *testing.T) {
	e := newEnv(t)
	name := stream.ConsumerName("default", "a")
	require.NoError(t, apply(e.filters, context.Background(), config(name, 10)))
	release, err := e.filters.Hold(context.Background(), name)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = apply(e.filters, short, config(name, 5))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "held by another")

	done := make(chan error, 1)
	go func() { done <- apply(e.filters, context.Background(), config(name, 5)) }()
	release()
	select {
	case err := <-done:
		require.NoError(t, err, "the waiter gets the lock once it is released")
	case <-time.After(wait):
		t.Fatal("the waiter did not get the released lock")
	}
}

func TestTheLockOfADeadHolderExpires(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	name := stream.ConsumerName("default", "a")
	// A shorter life than stream.LockTTL, to keep the test short.
	short := jsstream.LockBucketConfig(e.streams)
	short.TTL = time.Second
	kv, err := e.js.UpdateKeyValue(ctx, short)
	require.NoError(t, err)
	_, err = kv.Create(ctx, name, []byte("a process that died holding it"))
	require.NoError(t, err)

	bounded, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	require.NoError(t, apply(e.filters, bounded, config(name, 1)), "taken once it expired")
}

func TestTheLockBucketIsRemadeWhenNATSLostIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, e.js.DeleteKeyValue(ctx, e.streams.LockBucket()))
	require.NoError(t, apply(e.filters, ctx, config(stream.ConsumerName("default", "a"), 1)))
	_, err := e.js.KeyValue(ctx, e.streams.LockBucket())
	require.NoError(t, err)
}

// TestNoReplayIsLostWhileTheFilterChanges replays while the Subscription
// is re-applied and the sweep runs, all at once, and counts every replay
// delivered. Without the lock, a replay published while an Apply that read
// the filter before it writes its own, or a sweep that counted before it
// takes the subject out, is dropped by the interest-retention stream.
func TestNoReplayIsLostWhileTheFilterChanges(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := stream.ConsumerName("default", "a")
	require.NoError(t, apply(e.filters, ctx, config(name, 1000)))

	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_ = apply(e.filters, ctx, config(name, 999+i%2))
		}
	})
	churn.Go(func() {
		for ctx.Err() == nil {
			_, _ = e.filters.Sweep(ctx)
		}
	})
	const replays = 40
	var mu sync.Mutex
	got := map[string]bool{}
	c, err := e.js.Consumer(ctx, e.streams.EventStream, name)
	require.NoError(t, err)
	cc, err := c.Consume(func(m jetstream.Msg) {
		mu.Lock()
		got[string(m.Data())] = true
		mu.Unlock()
		_ = m.Ack()
	})
	require.NoError(t, err)
	defer cc.Stop()
	for i := range replays {
		e.replay(t, name, fmt.Sprint(i))
	}
	var n int
	assert.Eventually(t, func() bool {
		info, err := c.Info(ctx)
		if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
			return false
		}
		mu.Lock()
		n = len(got)
		mu.Unlock()
		return n == replays
	}, wait, tick)
	cancel()
	churn.Wait()
	assert.Equal(t, replays, n, "every replay delivered")
}

// apply is Filters.Apply without whether it created the consumer.
func apply(f replay.Filters, ctx context.Context, cfg jetstream.ConsumerConfig) error {
	_, err := f.Apply(ctx, cfg)
	return err
}
