package activity_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/metrictest"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// awaitActivation waits, without refreshing, for the announcement of an
// inactive->active transition on ch.
func awaitActivation(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no activation within 10s", msg)
	}
}

// A signal (here in-flight requests the gateway reported, then reported
// finished) keeps the Function active through a refresh that starts
// within the activation hold after it, although nothing else holds it
// active; with no hold the same refresh turns it inactive.
func TestActivationHoldOutlastsTheSignal(t *testing.T) {
	n := scalertest.StartNATS(t)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	for _, tc := range []struct {
		hold   time.Duration
		active bool
	}{
		{hold: time.Hour, active: true},
		{hold: 0, active: false},
	} {
		core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivationHold(tc.hold))
		require.NoError(t, err)
		require.NoError(t, core.Refresh(context.Background()))
		core.ReportInFlight("gw-0", map[types.NamespacedName]int{fn: 1}, time.Minute)
		core.ReportInFlight("gw-0", nil, time.Minute) // the request is over
		require.NoError(t, core.Refresh(context.Background()))
		st, err := core.State(fn)
		require.NoError(t, err)
		assert.Equal(t, activity.State{Active: tc.active}, st, "hold %s", tc.hold)
	}
}

// kfn_scaler_functions counts the Functions the scaler tracks: one with a
// Subscription, a watcher or requests in flight, or one still active, is
// kept; one with none of these is forgotten at the next refresh.
// kfn_scaler_functions_active counts the active ones and
// kfn_scaler_watchers the open watchers.
func TestMetricsCountFunctionsAndWatchers(t *testing.T) {
	n := scalertest.StartNATS(t)
	reg := prometheus.NewRegistry()
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil,
		activity.WithActivationHold(0), activity.WithMetrics(reg))
	require.NoError(t, err)
	watched := types.NamespacedName{Namespace: "shop", Name: "watched"}
	busy := types.NamespacedName{Namespace: "shop", Name: "busy"}
	idle := types.NamespacedName{Namespace: "shop", Name: "idle"} // a Subscription, no events
	sub := scalertest.Subscription(idle.Namespace, "idle-orders", idle.Name, "shop-idle", "order.created.v1")
	n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))

	_, _, cancel := core.Watch(watched)
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_watchers"), "one watcher")
	core.ReportInFlight("gw-0", map[types.NamespacedName]int{busy: 3}, time.Minute)
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 3.0, metrictest.Gauge(t, reg, "kfn_scaler_functions"), "watched, busy and idle are tracked")
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_functions_active"), "busy is active")

	// Still one active after more refreshes: the gauge is set, not added to.
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_functions_active"))

	cancel()
	cancel() // a second cancel changes nothing
	assert.Equal(t, 0.0, metrictest.Gauge(t, reg, "kfn_scaler_watchers"), "the watcher is gone")
	core.ReportInFlight("gw-0", nil, time.Minute)
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_functions"), "only idle, which has a Subscription, is left")
	assert.Equal(t, 0.0, metrictest.Gauge(t, reg, "kfn_scaler_functions_active"))
	st, err := core.State(idle)
	require.NoError(t, err)
	assert.Equal(t, activity.State{}, st, "no backlog is not active")

	core.Remove(sub.Namespace, sub.Name)
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 0.0, metrictest.Gauge(t, reg, "kfn_scaler_functions"), "nothing left to track")
}

// An active Function stays tracked while it is active, even when nothing
// else (a Subscription, a watcher, requests in flight) would keep it: a
// Function forgotten while active would read as inactive at once.
func TestAnActiveFunctionIsNotForgotten(t *testing.T) {
	n := scalertest.StartNATS(t)
	reg := prometheus.NewRegistry()
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil,
		activity.WithActivationHold(time.Hour), activity.WithMetrics(reg))
	require.NoError(t, err)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	core.ReportInFlight("gw-0", map[types.NamespacedName]int{fn: 1}, time.Minute)
	core.ReportInFlight("gw-0", nil, time.Minute)
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_functions"))
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_scaler_functions_active"))
}

// countingListener counts the listeners started on a real one.
type countingListener struct {
	activity.Listener
	n atomic.Int64
}

func (l *countingListener) Listen(subjects []string, fire func()) (func(), error) {
	l.n.Add(1)
	return l.Listener.Listen(subjects, fire)
}

// While a Function is inactive the scaler listens on its Subscriptions'
// subjects, so that an event published for it activates it without a
// refresh; it starts one listener, not one per refresh, and when its
// Subscriptions' subjects change the next refresh listens on the new ones
// instead.
func TestListensOnTheSubjectsOfAnInactiveFunction(t *testing.T) {
	n := scalertest.StartNATS(t)
	listener := &countingListener{Listener: activity.NewNATSListener(scalertest.Connect(t, n.Server.ClientURL()))}
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), listener, activity.WithActivationHold(0))
	require.NoError(t, err)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	const created, paid = "order.created.v1", "order.paid.v1"
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", created)
	n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))
	active, activated, cancel := core.Watch(fn)
	defer cancel()
	require.False(t, active)
	require.NoError(t, core.Refresh(context.Background()))
	require.NoError(t, core.Refresh(context.Background()))
	assert.Equal(t, int64(1), listener.n.Load(), "one listener while nothing changes")

	// The Subscription now asks for another type: the next refresh listens
	// on its subject.
	sub = scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", paid)
	require.NoError(t, core.Upsert(sub))
	require.NoError(t, core.Refresh(context.Background()))
	st, err := core.State(fn)
	require.NoError(t, err)
	require.False(t, st.Active, "no backlog, no requests")
	assert.Equal(t, int64(2), listener.n.Load(), "a listener on the new subjects")
	n.Publish(t, "shop", paid, "1")
	awaitActivation(t, activated, "an event of the new type")
	st, err = core.State(fn)
	require.NoError(t, err)
	assert.True(t, st.Active)
}

// TestActivationsGoToTheHook: a Function's first event while it has no
// work calls the activation hook (which the scaler's process publishes
// for the event bridge to claim a standby pod) once with that Function,
// and further events while it is active call it no more. Fails when the
// hook is not called, or called for every event.
func TestActivationsGoToTheHook(t *testing.T) {
	n := scalertest.StartNATS(t)
	activated := make(chan types.NamespacedName, 10)
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams),
		activity.NewNATSListener(scalertest.Connect(t, n.Server.ClientURL())), activity.WithActivationHold(time.Minute),
		activity.WithActivations(func(fn types.NamespacedName) { activated <- fn }))
	require.NoError(t, err)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	sub := scalertest.Subscription(fn.Namespace, "orders", fn.Name, "shop", "order.created.v1")
	n.CreateConsumer(t, sub)
	require.NoError(t, core.Upsert(sub))
	require.NoError(t, core.Refresh(context.Background()))
	n.Publish(t, "shop", "order.created.v1", "1")
	select {
	case got := <-activated:
		assert.Equal(t, fn, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the first event called no hook")
	}
	n.Publish(t, "shop", "order.created.v1", "2")
	require.NoError(t, core.Refresh(context.Background()))
	require.Never(t, func() bool { return len(activated) > 0 }, 300*time.Millisecond, 10*time.Millisecond, "active already: no second call")
	_, err = activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivations(nil))
	assert.ErrorIs(t, err, activity.ErrInvalidOption)
}
