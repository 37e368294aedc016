package streamloss_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/streamloss"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

type fixture struct {
	ns      *natstest.Server
	js      jetstream.JetStream
	streams stream.Config
	guard   *streamloss.Guard
	lost    *prometheus.CounterVec
	reg     *prometheus.Registry
}

// start runs a real NATS with kfn's streams, three events published, and
// a Guard that has had its first look.
func start(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ns: natstest.Start(t), streams: stream.DefaultConfig(), reg: prometheus.NewRegistry()}
	f.js = f.ns.JetStream()
	ctx := context.Background()
	require.NoError(t, jsstream.Ensure(ctx, f.js, f.streams))
	var err error
	f.guard, err = streamloss.New(f.js, []string{f.streams.EventStream, f.streams.DeadLetterStream}, streamloss.WithMetrics(f.reg))
	require.NoError(t, err)
	losses, err := f.guard.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, losses, "the first look only learns")
	f.publish(t, 3)
	return f
}

func (f *fixture) publish(t *testing.T, n int) {
	t.Helper()
	for range n {
		_, err := f.js.Publish(context.Background(), "kyma.shop.order.created.v1", []byte(`{}`))
		require.NoError(t, err)
	}
}

// check waits until the Guard could look at NATS again (the client
// reconnects after a restart) and returns what it found.
func (f *fixture) check(t *testing.T) []streamloss.Loss {
	t.Helper()
	var losses []streamloss.Loss
	require.Eventually(t, func() bool {
		var err error
		losses, err = f.guard.Check(context.Background())
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "the guard looks at NATS")
	return losses
}

func (f *fixture) counted(t *testing.T, streamName, reason string) float64 {
	t.Helper()
	n, err := testutil.GatherAndCount(f.reg, "kfn_eventbridge_streams_lost_total")
	require.NoError(t, err)
	require.Equal(t, 4, n, "a series per stream and reason from the start")
	return lostCount(t, f.reg, streamName, reason)
}

// lostCount is the count of a stream's losses of a reason in reg.
func lostCount(t *testing.T, reg *prometheus.Registry, streamName, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["stream"] == streamName && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series for %s %s", streamName, reason)
	return 0
}

// TestStoreDirDeletedIsALoss stops NATS, deletes its store directory and
// starts it again: both streams are missing, which is reported once per
// stream with the last sequence seen; once the streams are made anew (as
// the event bridge does), that is the new baseline and nothing more is
// reported.
func TestStoreDirDeletedIsALoss(t *testing.T) {
	f := start(t)
	f.check(t) // learns the last sequence, 3

	f.ns.Shutdown()
	require.NoError(t, os.RemoveAll(f.ns.StoreDir()))
	f.ns.Restart()

	losses := f.check(t)
	assert.ElementsMatch(t, []streamloss.Loss{
		{Stream: f.streams.EventStream, Reason: streamloss.ReasonMissing, LastSeq: 3},
		{Stream: f.streams.DeadLetterStream, Reason: streamloss.ReasonMissing, LastSeq: 0},
	}, losses)
	assert.Equal(t, 1.0, f.counted(t, f.streams.EventStream, streamloss.ReasonMissing))
	assert.Equal(t, 1.0, f.counted(t, f.streams.DeadLetterStream, streamloss.ReasonMissing))

	assert.Empty(t, f.check(t), "a loss is reported once")
	require.NoError(t, jsstream.Ensure(context.Background(), f.js, f.streams))
	assert.Empty(t, f.check(t), "the stream made anew is the new baseline")
	f.publish(t, 1)
	assert.Empty(t, f.check(t))
	assert.Equal(t, 1.0, f.counted(t, f.streams.EventStream, streamloss.ReasonMissing))
}

// TestStreamMadeAnewBeforeTheLookIsALoss: another event bridge replica
// made the stream anew before this one looked, so it is there, empty,
// with a lower last sequence and another creation time.
func TestStreamMadeAnewBeforeTheLookIsALoss(t *testing.T) {
	f := start(t)
	f.check(t)
	require.NoError(t, f.js.DeleteStream(context.Background(), f.streams.EventStream))
	require.NoError(t, jsstream.Ensure(context.Background(), f.js, f.streams))

	assert.Equal(t, []streamloss.Loss{{Stream: f.streams.EventStream, Reason: streamloss.ReasonRecreated, LastSeq: 3}}, f.check(t))
	assert.Equal(t, 1.0, f.counted(t, f.streams.EventStream, streamloss.ReasonRecreated))
	assert.Empty(t, f.check(t), "reported once")
}

// TestRestartAndDeliveredEventsAreNoLoss: a NATS restart with its store,
// and an event stream left empty because its events were all taken (no
// consumer is interested: interest retention keeps none), are not losses.
func TestRestartAndDeliveredEventsAreNoLoss(t *testing.T) {
	f := start(t)
	f.check(t)
	info, err := f.js.Stream(context.Background(), f.streams.EventStream)
	require.NoError(t, err)
	require.Zero(t, info.CachedInfo().State.Msgs, "interest retention kept nothing")

	f.ns.Restart()
	assert.Empty(t, f.check(t))
	f.publish(t, 2)
	assert.Empty(t, f.check(t))
	assert.Zero(t, f.counted(t, f.streams.EventStream, streamloss.ReasonMissing))
	assert.Zero(t, f.counted(t, f.streams.EventStream, streamloss.ReasonRecreated))
}

// TestPartitionTakenAwayIsNoLoss: a partition deleted on purpose (taken
// away, drained) is no loss; one missing that partition 0 still counts
// is, and so is one the Guard could not ask about, at a later look.
func TestPartitionTakenAwayIsNoLoss(t *testing.T) {
	ns := natstest.Start(t)
	js := ns.JetStream()
	ctx := context.Background()
	three := stream.DefaultConfig()
	three.Storage = stream.StorageMemory
	three.Partitions = 3
	one := three
	one.Partitions = 1
	require.NoError(t, jsstream.Ensure(ctx, js, three))
	reg := prometheus.NewRegistry()
	var askErr error
	guard, err := streamloss.New(js, three.PartitionStreams(), streamloss.WithMetrics(reg),
		streamloss.WithTakenAway(func(ctx context.Context, name string) (bool, error) {
			if askErr != nil {
				return false, askErr
			}
			return jsstream.TakenAway(ctx, js, one, name)
		}))
	require.NoError(t, err)
	losses, err := guard.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, losses)

	require.NoError(t, js.DeleteStream(ctx, three.PartitionStream(1)))
	losses, err = guard.Check(ctx)
	require.NoError(t, err)
	assert.Equal(t, []streamloss.Loss{{Stream: "kfn-events-1", Reason: streamloss.ReasonMissing}}, losses,
		"partition 0 counts three partitions: 1 was lost")

	_, err = jsstream.RecordPartitions(ctx, js, one) // the count lowered to one by the leader
	askErr = errors.New("NATS unreachable")
	require.NoError(t, js.DeleteStream(ctx, three.PartitionStream(2)))
	_, err = guard.Check(ctx)
	require.ErrorIs(t, err, askErr)
	askErr = nil
	losses, err = guard.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, losses, "partition 2 was taken away, then deleted once drained")
	assert.Zero(t, lostCount(t, reg, "kfn-events-2", streamloss.ReasonMissing))
	assert.Equal(t, 1.0, lostCount(t, reg, "kfn-events-1", streamloss.ReasonMissing))
}
