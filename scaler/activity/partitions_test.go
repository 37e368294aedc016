package activity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// TestBacklogAndActivationOfEveryPartition: a Function's backlog is its
// consumers' in every partition of the event stream, and an event
// published to any partition wakes it.
func TestBacklogAndActivationOfEveryPartition(t *testing.T) {
	n := scalertest.StartNATS(t)
	ctx := context.Background()
	streams := n.Streams
	streams.Partitions = 3
	require.NoError(t, jsstream.Ensure(ctx, n.JS, streams))
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	cfg, err := jsstream.ConsumerConfig(sub, stream.ConsumerSettings{})
	require.NoError(t, err)
	for _, name := range streams.PartitionStreams() {
		_, err := jsstream.EnsureConsumer(ctx, n.JS, name, cfg)
		require.NoError(t, err)
	}
	core, err := activity.New(activity.NewJetStreamReader(n.JS, streams),
		activity.NewNATSListener(scalertest.Connect(t, n.Server.ClientURL())), activity.WithActivationHold(0))
	require.NoError(t, err)
	require.NoError(t, core.Upsert(sub))
	_, activated, cancel := core.Watch(fn)
	defer cancel()
	require.NoError(t, core.Refresh(ctx))

	subject, err := eventingv1alpha2.EventSubject("shop", "order.created.v1")
	require.NoError(t, err)
	_, err = n.JS.Publish(ctx, stream.PublishSubject(2, subject), []byte(`{}`))
	require.NoError(t, err)
	awaitActivation(t, activated, "an event of partition 2")
	for _, p := range []int{0, 1, 1} {
		_, err = n.JS.Publish(ctx, stream.PublishSubject(p, subject), []byte(`{}`))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		if core.Refresh(ctx) != nil {
			return false
		}
		st, err := core.State(fn)
		return err == nil && st.Backlog == 4
	}, 10*time.Second, 10*time.Millisecond, "the backlog of the three partitions")
	st, err := core.State(fn)
	require.NoError(t, err)
	assert.True(t, st.Active)
}
