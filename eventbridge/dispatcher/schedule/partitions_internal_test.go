package schedule

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadline"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/delivery"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

func testScheduler(t *testing.T, js jetstream.JetStream, streams stream.Config) *Scheduler {
	t.Helper()
	return New(js, Config{
		Streams: streams, Defaults: v1alpha2.DefaultDelivery(), PullExpiry: time.Second, PartitionLook: 20 * time.Millisecond,
		BudgetInterval: time.Second, ShutdownGrace: time.Second, MaxHeldBytes: 1 << 20, MaxHeldBytesPerSubscription: 1 << 20,
	}, Parts{
		Sender: delivery.NewSender(delivery.Config{
			JetStream: js, Transport: http.DefaultTransport, Resolver: delivery.DirectResolver, Deadlines: deadline.New(time.Second),
		}),
		Recorder: observe.NewRecorder(observe.Config{}), Endpoints: AlwaysReady{}, Log: slog.New(slog.DiscardHandler),
	})
}

// partitionsOf returns the partitions in which the Subscription
// default/name has a worker, in order, and the workers' gates.
func (s *Scheduler) partitionsOf(name string) ([]int, map[int]inFlightGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gates := map[int]inFlightGate{}
	for k, w := range s.workers {
		if k.namespace == "default" && k.name == name {
			gates[k.partition] = w.gate
		}
	}
	return slices.Sorted(maps.Keys(gates)), gates
}

// An event bridge of one partition serves the partitions a larger one
// left (taken away, still drained), each Subscription with a worker in
// each, which keep its maxInFlightMessages together; a partition drained
// and deleted loses its workers; Remove stops them all.
func TestWorkersFollowTheServedPartitions(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect())
	require.NoError(t, err)
	ctx := context.Background()
	one := stream.DefaultConfig()
	one.Storage = stream.StorageMemory
	three := one
	three.Partitions = 3
	require.NoError(t, jsstream.Ensure(ctx, js, one))
	s := testScheduler(t, js, one)
	sub := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec: v1alpha2.SubscriptionSpec{Sink: "http://fn.default.svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"},
			Config: map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: "4"}},
	}
	require.NoError(t, s.Upsert(sub))
	ps, gates := s.partitionsOf("s")
	require.Equal(t, []int{0}, ps)
	assert.Nil(t, gates[0], "one partition: the consumer holds maxInFlightMessages")

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	require.NoError(t, jsstream.Ensure(ctx, js, three)) // what an event bridge of three partitions left
	require.Eventually(t, func() bool { ps, _ := s.partitionsOf("s"); return slices.Equal(ps, []int{0, 1, 2}) }, 5*time.Second, 10*time.Millisecond,
		"a worker in each partition found")
	_, gates = s.partitionsOf("s")
	require.NotNil(t, gates[0])
	assert.Equal(t, 4, cap(gates[0]))
	for p := range 3 {
		assert.Equal(t, gates[0], gates[p], "partition %d: one gate of maxInFlightMessages for the Subscription", p)
	}

	require.NoError(t, js.DeleteStream(ctx, three.PartitionStream(1)))
	require.Eventually(t, func() bool { ps, _ := s.partitionsOf("s"); return slices.Equal(ps, []int{0, 2}) }, 5*time.Second, 10*time.Millisecond,
		"the worker of a partition deleted stops")
	require.NoError(t, js.DeleteStream(ctx, three.PartitionStream(2)))
	require.Eventually(t, func() bool { ps, _ := s.partitionsOf("s"); return slices.Equal(ps, []int{0}) }, 5*time.Second, 10*time.Millisecond)
	_, gates = s.partitionsOf("s")
	assert.Nil(t, gates[0], "one partition again: no gate")

	cancel()
	<-done // no look any more: SetPartitions alone
	s.SetPartitions([]int{0, 5})
	ps, _ = s.partitionsOf("s")
	assert.Equal(t, []int{0, 5}, ps)
	s.Remove("default", "s")
	ps, _ = s.partitionsOf("s")
	assert.Empty(t, ps, "Remove stops the workers of every partition")
}
