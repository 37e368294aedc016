package scaler_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/scaler"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/scalertest"
	"github.com/kfn-dev/kfn/test/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	os.Exit(testcluster.Main(m, testcluster.Into(&cluster), testcluster.WithScheme(eventingv1alpha2.AddToScheme)))
}

// env is a real scaler core on an embedded NATS, fed by the event
// bridge's feed.Feeder from the test API server, as Run feeds it.
type env struct {
	nats *scalertest.NATS
	core *activity.Scaler
	ns   string
}

// newEnv creates a namespace, an embedded NATS and the core.
func newEnv(t *testing.T) *env {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scaler-"}}
	require.NoError(t, cluster.Client.Create(context.Background(), ns))
	n := scalertest.StartNATS(t)
	core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivationHold(0))
	require.NoError(t, err)
	return &env{nats: n, core: core, ns: ns.Name}
}

// start starts the manager with the Feeder and primes the core, as Run
// does.
func (e *env) start(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:                 cluster.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)}, // one manager per test,
	})
	require.NoError(t, err)
	f := &feed.Feeder{Client: mgr.GetClient(), Targets: e.core, Name: scaler.FeederName}
	require.NoError(t, f.SetupWithManager(mgr))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	require.NoError(t, f.Prime(pctx, mgr.GetCache()))
}

func (e *env) subscription(name, fn, eventType string) *eventingv1alpha2.Subscription {
	return scalertest.Subscription(e.ns, name, fn, "shop", eventType)
}

// create stores s in the API server and creates its consumer, as the event
// bridge would.
func (e *env) create(t *testing.T, s *eventingv1alpha2.Subscription) {
	t.Helper()
	require.NoError(t, cluster.Client.Create(context.Background(), s))
	if _, err := s.ValidateSink(); err == nil {
		e.nats.CreateConsumer(t, s)
	}
}

// backlog refreshes the core and returns the Function's backlog (an
// error for a missing consumer or unreadable backlog).
func (e *env) backlog(fn string) (uint64, error) {
	if err := e.core.Refresh(context.Background()); err != nil {
		return 0, err
	}
	st, err := e.core.State(types.NamespacedName{Namespace: e.ns, Name: fn})
	return st.Backlog, err
}

func (e *env) eventuallyBacklog(t *testing.T, fn string, want uint64) {
	t.Helper()
	var got uint64
	var err error
	require.Eventually(t, func() bool {
		got, err = e.backlog(fn)
		return err == nil && got == want
	}, 10*time.Second, 20*time.Millisecond, "backlog of %s: want %d, last %d (%v)", fn, want, got, err)
}

func TestPrimedWithSubscriptionsThatExistBeforeStart(t *testing.T) {
	e := newEnv(t)
	e.create(t, e.subscription("orders-created", "orders", "order.created.v1"))
	e.create(t, e.subscription("orders-paid", "orders", "order.paid.v1"))
	e.start(t)
	// Events wait for both Subscriptions: the first refresh after Prime
	// counts them all, with no wait for the controller's own reconciles.
	e.nats.Publish(t, "shop", "order.created.v1", "1")
	e.nats.Publish(t, "shop", "order.paid.v1", "2")
	e.nats.Publish(t, "shop", "order.paid.v1", "3")
	e.nats.AwaitPending(t, 3) // JetStream's own count, not the core's
	got, err := e.backlog("orders")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), got)
}

func TestFollowsSubscriptions(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	ctx := context.Background()

	// Created: its consumer's backlog is the Function's.
	s := e.subscription("orders-created", "orders", "order.created.v1")
	e.create(t, s)
	e.nats.Publish(t, "shop", "order.created.v1", "1")
	e.nats.Publish(t, "shop", "order.created.v1", "2")
	e.eventuallyBacklog(t, "orders", 2)

	// Its sink moves to another Function: the backlog moves with it.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
	s.Spec.Sink = fmt.Sprintf("http://billing.%s.svc.cluster.local", e.ns)
	require.NoError(t, cluster.Client.Update(ctx, s))
	e.eventuallyBacklog(t, "billing", 2)
	e.eventuallyBacklog(t, "orders", 0)

	// Becomes invalid (a sink in another namespace, which the CRD admits):
	// ignored, so the Function it fed is idle, not in error.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
	s.Spec.Sink = "http://billing.elsewhere.svc.cluster.local"
	require.NoError(t, cluster.Client.Update(ctx, s))
	e.eventuallyBacklog(t, "billing", 0)

	// An invalid one from the start feeds nothing either.
	bad := e.subscription("bad", "orders", "order.created.v1")
	bad.Spec.Sink = "http://orders.elsewhere.svc.cluster.local"
	e.create(t, bad)

	// Valid again, then deleted: forgotten.
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
	s.Spec.Sink = fmt.Sprintf("http://billing.%s.svc.cluster.local", e.ns)
	require.NoError(t, cluster.Client.Update(ctx, s))
	e.eventuallyBacklog(t, "billing", 2)
	require.NoError(t, cluster.Client.Delete(ctx, s))
	e.eventuallyBacklog(t, "billing", 0)
	got, err := e.backlog("orders")
	require.NoError(t, err)
	assert.Zero(t, got, "the invalid Subscription feeds nothing")
}

func TestMissingConsumerIsAnErrorNotZero(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	s := e.subscription("orders-created", "orders", "order.created.v1")
	require.NoError(t, cluster.Client.Create(context.Background(), s)) // no consumer yet
	require.Eventually(t, func() bool {
		_, err := e.backlog("orders")
		return err != nil
	}, 10*time.Second, 20*time.Millisecond)
	_, err := e.backlog("orders")
	assert.ErrorIs(t, err, activity.ErrConsumerNotFound)
	e.nats.CreateConsumer(t, s)
	e.eventuallyBacklog(t, "orders", 0)
}
