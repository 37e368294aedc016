package activity_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/metrictest"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// floodSubscription returns a Subscription of namespace ns feeding the
// Function fn, with a source of 1,000 bytes and n types of about 490 bytes
// each (within the CRD's bounds): 2n+1 subjects to listen on.
func floodSubscription(ns, fn string, n int) *eventingv1alpha2.Subscription {
	sub := scalertest.Subscription(ns, fn, fn, strings.Repeat("s", 1000), "")
	sub.Spec.Types = nil
	for i := range n {
		sub.Spec.Types = append(sub.Spec.Types, fmt.Sprintf("%s.%s.v%d", fn, strings.Repeat("t", 480), i))
	}
	return sub
}

// TestListenedSubjectsAreBoundedPerNamespace: a tenant's 300
// Subscriptions in one namespace, each with long types and a consumer,
// cost the scaler no more NATS subscriptions than the namespace's bound
// (DefaultMaxListenSubjectsPerNamespace) and no goroutine per subject;
// a Function of that namespace past the bound is woken by the refresh
// (its backlog), and a Function of another namespace is still woken by
// its first event at once, without a refresh. Fails when every subject of
// every Function is listened on (5,100 subscriptions, a goroutine each).
func TestListenedSubjectsAreBoundedPerNamespace(t *testing.T) {
	// 8 types a Subscription, not the CRD's 64: 17 subjects each are far
	// past the bound already, and JetStream takes tens of seconds to list
	// 300 consumers of 64 long filter subjects.
	const functions, typesEach = 300, 8
	n := scalertest.StartNATS(t)
	conn := scalertest.Connect(t, n.Server.ClientURL())
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), activity.NewNATSListener(conn),
		activity.WithActivationHold(0))
	require.NoError(t, err)
	var flood []*eventingv1alpha2.Subscription
	for i := range functions {
		sub := floodSubscription("flood", fmt.Sprintf("fn-%03d", i), typesEach)
		n.CreateConsumer(t, sub)
		require.NoError(t, core.Upsert(sub))
		flood = append(flood, sub)
	}
	shop := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(shop.Namespace, "orders", shop.Name, "shop", "order.created.v1")
	n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))
	_, activated, cancel := core.Watch(shop)
	defer cancel()
	last := types.NamespacedName{Namespace: "flood", Name: fmt.Sprintf("fn-%03d", functions-1)}
	_, lastActivated, cancelLast := core.Watch(last)
	defer cancelLast()

	goroutines := runtime.NumGoroutine()
	require.NoError(t, core.Refresh(context.Background()))
	subs := conn.NumSubscriptions()
	assert.LessOrEqual(t, subs, activity.DefaultMaxListenSubjectsPerNamespace+3,
		"the flooding namespace's bound, and the 3 subjects of shop/orders")
	assert.Greater(t, subs, 3, "the flooding namespace is listened for within its bound")
	assert.Less(t, runtime.NumGoroutine()-goroutines, 50, "no goroutine per subject (%d subscriptions)", subs)

	// shop/orders is woken by its first event, without a refresh.
	n.Publish(t, "shop", "order.created.v1", "1")
	awaitActivation(t, activated, "the first event of a namespace within its bound")

	// The last Function of the flooding namespace is past the bound: the
	// refresh finds its event in its backlog.
	n.Publish(t, flood[functions-1].Spec.Source, flood[functions-1].Spec.Types[0], "1")
	require.Eventually(t, func() bool {
		if core.Refresh(context.Background()) != nil {
			return false
		}
		st, err := core.State(last)
		return err == nil && st.Active
	}, 10*time.Second, 10*time.Millisecond, "a Function past the bound is woken by the refresh")
	awaitActivation(t, lastActivated, "the refresh")
}

// TestNoListenerForAFunctionWithoutConsumer: a Function one of whose
// Subscriptions has no consumer (past the namespace's consumer limit, say)
// can be delivered nothing, and is not listened for; the refresh after
// its consumer is created listens for it, and the refresh after the
// consumer is gone stops. Fails when the scaler listens for a Function
// whose backlog lookup found no consumer.
func TestNoListenerForAFunctionWithoutConsumer(t *testing.T) {
	n := scalertest.StartNATS(t)
	conn := scalertest.Connect(t, n.Server.ClientURL())
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), activity.NewNATSListener(conn),
		activity.WithActivationHold(0))
	require.NoError(t, err)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	require.NoError(t, core.Upsert(sub))

	require.NoError(t, core.Refresh(context.Background()))
	_, err = core.State(fn)
	require.ErrorIs(t, err, activity.ErrConsumerNotFound)
	assert.Equal(t, 0, conn.NumSubscriptions(), "no consumer, no listener")

	n.CreateConsumer(t, sub)
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 3, conn.NumSubscriptions(), "listened for once its consumer exists")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, n.JS.DeleteConsumer(ctx, n.Streams.EventStream, stream.ConsumerName(sub.Namespace, sub.Name)))
	require.NoError(t, core.Refresh(context.Background()))
	_, err = core.State(fn)
	require.ErrorIs(t, err, activity.ErrConsumerNotFound)
	assert.Equal(t, 0, conn.NumSubscriptions(), "the listener ends with the consumer")
}

// TestListenedSubjectsAreBoundedInTotal: past the scaler's total bound,
// the namespaces that ask for fewest subjects are listened for first, and
// a Function is listened for on all of its subjects or on none. Fails when
// the bound is not kept, or a large namespace crowds out a small one.
func TestListenedSubjectsAreBoundedInTotal(t *testing.T) {
	n := scalertest.StartNATS(t)
	conn := scalertest.Connect(t, n.Server.ClientURL())
	reg := prometheus.NewRegistry()
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), activity.NewNATSListener(conn),
		activity.WithActivationHold(0), activity.WithListenBounds(6, 8), activity.WithMetrics(reg))
	require.NoError(t, err)
	// big/a, big/b and big/c ask for 3 subjects each (9, over the
	// namespace's 6), small/orders for 3: small/orders and one Function
	// of big fit in 8.
	for _, name := range []string{"a", "b", "c"} {
		sub := scalertest.Subscription("big", name, name, "big", "thing."+name)
		n.CreateConsumer(t, sub)
		require.NoError(t, core.Upsert(sub))
	}
	small := types.NamespacedName{Namespace: "small", Name: "orders"}
	sub := scalertest.Subscription(small.Namespace, "orders", small.Name, "small", "order.created.v1")
	n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))
	_, activated, cancel := core.Watch(small)
	defer cancel()

	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 6, conn.NumSubscriptions(), "small/orders and big/a, whole")
	assert.Equal(t, 6.0, metrictest.Gauge(t, reg, "kfn_scaler_listen_subjects"))
	assert.Equal(t, 2.0, metrictest.Gauge(t, reg, "kfn_scaler_functions_past_listen_bounds"), "big/b and big/c")
	n.Publish(t, "small", "order.created.v1", "1")
	awaitActivation(t, activated, "the namespace that asks for least")
}
