package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/natstest"
)

// TestOpenerOpensOnceTheConsumersExist: a missing event stream is made
// closed; the Opener makes the consumers, then opens it; a consumer that
// cannot be made keeps it closed for OpenAnywayAfter looks, then it opens
// all the same; an open stream is left alone (no consumer is made again).
func TestOpenerOpensOnceTheConsumersExist(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	streams := stream.DefaultConfig()
	streams.Storage = stream.StorageMemory
	var calls int
	fail := errors.New("NATS refused the consumer")
	failing := true
	o := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: streams}, func(ctx context.Context) []error {
		calls++
		if failing {
			return []error{fail}
		}
		return nil
	}, nil)
	o.OpenAnywayAfter = 3
	reg := prometheus.NewRegistry()
	require.NoError(t, o.WithMetrics(reg))
	isOpen := func() bool {
		open, err := jsstream.EventStreamOpen(ctx, js, streams)
		require.NoError(t, err)
		return open
	}
	metrics := func(closed, openedAnyway int) string {
		return fmt.Sprintf(`
# HELP kfn_eventbridge_event_stream_closed 1 while the event stream is held closed (publishing answers 503) until every Subscription's consumer exists in it, as this replica's last look found it.
# TYPE kfn_eventbridge_event_stream_closed gauge
kfn_eventbridge_event_stream_closed{stream="kfn-events"} %d
# HELP kfn_eventbridge_event_stream_opened_anyway_total Times the event stream was opened although some Subscription's consumer could not be made (its events are lost until it is).
# TYPE kfn_eventbridge_event_stream_opened_anyway_total counter
kfn_eventbridge_event_stream_opened_anyway_total{stream="kfn-events"} %d
`, closed, openedAnyway)
	}

	for i := 1; i < 3; i++ {
		opened, err := o.Open(ctx)
		require.ErrorIs(t, err, fail)
		assert.False(t, opened)
		assert.False(t, isOpen(), "made closed, kept closed while a consumer cannot be made (look %d)", i)
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(metrics(1, 0))), "reported closed (look %d)", i)
	}
	opened, err := o.Open(ctx)
	require.NoError(t, err)
	assert.True(t, opened, "opened all the same at the third look")
	assert.True(t, isOpen())
	assert.Equal(t, 3, calls)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(metrics(0, 1))), "reported open, and opened anyway once")

	opened, err = o.Open(ctx)
	require.NoError(t, err)
	assert.False(t, opened)
	assert.Equal(t, 3, calls, "an open stream is left alone")

	require.NoError(t, js.DeleteStream(ctx, streams.EventStream))
	failing = false
	opened, err = o.Open(ctx)
	require.NoError(t, err)
	assert.True(t, opened, "made anew closed, the consumers made, opened in one look")
	assert.Equal(t, 4, calls)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(metrics(0, 1))), "opened with every consumer: not opened anyway")
	_, err = js.Publish(ctx, "kyma.shop.order.created.v1", []byte(`{}`))
	require.NoError(t, err)
	_, err = js.Publish(ctx, stream.ClosedSubjectPrefix+"."+streams.EventStream, nil)
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "open: the closed subject is gone")
}

// TestOpenerRunLooksAtOnceAndAtEachWake: with an interval longer than the
// test, Run opens a missing stream at its first look, and again after a
// Wake once the stream was made anew; a failing consumer keeps it closed
// for DefaultOpenAnywayAfter looks when OpenAnywayAfter is not set. Run
// returns nil when its context ends.
func TestOpenerRunLooksAtOnceAndAtEachWake(t *testing.T) {
	js := natstest.Start(t).JetStream()
	streams := stream.DefaultConfig()
	streams.Storage = stream.StorageMemory
	var failing atomic.Bool
	o := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: streams}, func(context.Context) []error {
		if failing.Load() {
			return []error{errors.New("refused")}
		}
		return nil
	}, nil)
	o.Interval = time.Hour
	isOpen := func() bool {
		open, err := jsstream.EventStreamOpen(context.Background(), js, streams)
		return err == nil && open
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	require.Eventually(t, isOpen, 10*time.Second, 10*time.Millisecond, "opened at the first look")

	failing.Store(true)
	require.NoError(t, js.DeleteStream(context.Background(), streams.EventStream))
	o.Wake()
	require.Eventually(t, func() bool {
		_, err := jsstream.EventStreamOpen(context.Background(), js, streams)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "made anew at the Wake")
	for range subscription.DefaultOpenAnywayAfter - 2 {
		o.Wake()
	}
	require.Never(t, isOpen, 300*time.Millisecond, 10*time.Millisecond, "closed while the consumer fails, fewer than DefaultOpenAnywayAfter looks")
	failing.Store(false)
	o.Wake()
	require.Eventually(t, isOpen, 10*time.Second, 10*time.Millisecond, "opened once the consumers exist")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

// A move from profile small to ha can leave the streams with one replica:
// an event bridge of the small configuration, still leading, makes a
// stream NATS lost anew. The leader of the ha configuration raises every
// stream (events, dead letters, the lock bucket) to its replicas at its
// next look; a leader of a smaller configuration never lowers them.
func TestOpenerRaisesStreamsMadeWithFewerReplicas(t *testing.T) {
	js := natstest.StartCluster(t, 3).JetStream(t)
	ctx := context.Background()
	small := stream.DefaultConfig()
	small.Storage = stream.StorageMemory
	ha := small
	ha.Replicas = 3
	require.NoError(t, jsstream.Ensure(ctx, js, small), "streams made by a replica of profile small")
	none := func(context.Context) []error { return nil }
	replicasOf := func() ([]int, error) {
		var out []int
		for _, name := range []string{ha.EventStream, ha.DeadLetterStream, "KV_" + ha.LockBucket()} {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return out, err
			}
			out = append(out, s.CachedInfo().Config.Replicas)
		}
		return out, nil
	}
	replicas := func() []int {
		out, err := replicasOf()
		require.NoError(t, err)
		return out
	}

	// The leader looks every second; on a loaded machine one look's
	// updates can time out (NATS moves each stream to three servers), and
	// the next look goes on where it stopped.
	haLeader := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: ha}, none, nil)
	var (
		mu   sync.Mutex
		last error
		got  []int
	)
	raised := func() bool {
		_, err := haLeader.Open(ctx)
		var n []int
		if err == nil {
			n, err = replicasOf()
		}
		mu.Lock()
		defer mu.Unlock()
		last, got = err, n
		return err == nil && slices.Equal([]int{3, 3, 3}, n)
	}
	if !assert.Eventually(t, raised, 30*time.Second, 100*time.Millisecond, "raised by the ha leader's looks") {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("replicas %v after 30 s of looks, the last one's error: %v", got, last)
	}

	_, err := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: small}, none, nil).Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 3, 3}, replicas(), "a leader of profile small does not lower them")
}

// A dead-letter stream or lock bucket that went missing while the event
// stream stayed is made again at the leader's next look.
func TestOpenerMakesAMissingDeadLetterStreamAgain(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	streams := stream.DefaultConfig()
	streams.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(ctx, js, streams))
	require.NoError(t, js.DeleteStream(ctx, streams.DeadLetterStream))
	_, err := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: streams}, func(context.Context) []error { return nil }, nil).Open(ctx)
	require.NoError(t, err)
	_, err = js.Stream(ctx, streams.DeadLetterStream)
	assert.NoError(t, err, "made again")
}

// TestOpenerOpensEachPartitionAndSpreadsTheirLeaders: on a 3-server
// cluster with three R3 partitions, a partition lost alone is made anew
// closed and opened once the consumers are made again, the others taking
// events throughout; and the leader's looks put each partition's leader on
// a server of its own.
func TestOpenerOpensEachPartitionAndSpreadsTheirLeaders(t *testing.T) {
	js := natstest.StartCluster(t, 3).JetStream(t)
	ctx := context.Background()
	streams := stream.DefaultConfig()
	streams.Storage, streams.Replicas, streams.Partitions = stream.StorageMemory, 3, 3
	require.Eventually(t, func() bool { return jsstream.Ensure(ctx, js, streams) == nil }, 30*time.Second, 50*time.Millisecond)
	made := 0
	o := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: streams}, func(context.Context) []error { made++; return nil }, nil)

	require.NoError(t, js.DeleteStream(ctx, streams.PartitionStream(1)))
	opened, err := o.Open(ctx)
	require.NoError(t, err)
	assert.True(t, opened)
	assert.Equal(t, 1, made, "the consumers made before the partition made anew takes events")
	open, err := jsstream.EventStreamOpen(ctx, js, streams)
	require.NoError(t, err)
	assert.True(t, open)

	leaders := func() map[string]bool {
		seen := map[string]bool{}
		for _, name := range streams.PartitionStreams() {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return nil // an election under way
			}
			if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" {
				seen[ci.Leader] = true
			}
		}
		return seen
	}
	// Every leader on one server first (NATS may spread them by chance),
	// as an operator's step-downs may leave them.
	require.Eventually(t, func() bool {
		for _, name := range streams.PartitionStreams() {
			_ = jsstream.MoveLeader(ctx, js, name, "n0") // failed: the next look asks again
		}
		l := leaders()
		return len(l) == 1 && l["n0"]
	}, 60*time.Second, 200*time.Millisecond, "every partition led by n0")
	// Looks every 100 ms, the leaders spread every tenth, as every second
	// and every 10 s in an event bridge.
	require.Eventually(t, func() bool {
		if _, err := o.Open(ctx); err != nil {
			t.Logf("look: %v", err)
		}
		return len(leaders()) == 3
	}, 60*time.Second, 100*time.Millisecond, "three partitions led by three servers")
	assert.Equal(t, 1, made, "an open stream is left alone")
}

// TestOpenerDrainsPartitionsTakenAway: an Opener of one partition, where
// an event bridge of three left partitions 1 and 2, closes them at its
// look, deletes the empty one at the next, and the other once its event
// was delivered; the stream stays open and no consumer is made.
func TestOpenerDrainsPartitionsTakenAway(t *testing.T) {
	js := natstest.Start(t).JetStream()
	ctx := context.Background()
	three := stream.DefaultConfig()
	three.Storage, three.Partitions = stream.StorageMemory, 3
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
	made := 0
	var logs logtest.Buffer
	o := subscription.NewOpener(subscription.Applier{JetStream: js, Streams: one}, func(context.Context) []error { made++; return nil },
		slog.New(slog.NewJSONHandler(&logs, nil)))
	served := func() []int {
		ps, err := jsstream.ServedPartitions(ctx, js, one)
		require.NoError(t, err)
		return ps
	}

	for range 3 {
		opened, err := o.Open(ctx)
		require.NoError(t, err)
		assert.False(t, opened, "open all along")
	}
	assert.Equal(t, []int{0, 2}, served(), "the empty partition deleted, the other draining")
	for _, msg := range []string{
		`"msg":"recorded the count of partitions in the event stream","partitions":1`,
		`"msg":"closed partitions taken away: their events are delivered, then they are deleted","partitions":[1,2]`,
		`"msg":"deleted partitions taken away: every event they held was delivered","partitions":[1]`,
	} {
		assert.Equal(t, 1, strings.Count(logs.String(), msg), "logged once: %s", msg)
	}
	_, err = js.Publish(ctx, stream.PublishSubject(2, subject), []byte(`{}`))
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "closed")

	cons, err := js.Consumer(ctx, one.PartitionStream(2), "orders")
	require.NoError(t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.NoError(t, msg.DoubleAck(ctx))
	require.Eventually(t, func() bool {
		_, err := o.Open(ctx)
		require.NoError(t, err)
		return len(served()) == 1
	}, 10*time.Second, 20*time.Millisecond, "deleted once its event was delivered")
	assert.Zero(t, made, "no consumer made: the stream was open")
}
