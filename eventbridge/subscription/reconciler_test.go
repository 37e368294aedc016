package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
	"github.com/kfn-dev/kfn/test/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	os.Exit(testcluster.Main(m, testcluster.Into(&cluster), testcluster.WithScheme(v1alpha2.AddToScheme)))
}

// targets records what the Feeder or a Set tells the dispatcher; it
// refuses the Subscription named refuse.
type targets struct {
	mu      sync.Mutex
	serving map[string]*v1alpha2.Subscription
	refuse  string
}

func (t *targets) Upsert(s *v1alpha2.Subscription) error {
	if _, err := s.ValidateSink(); err != nil {
		t.Remove(s.Namespace, s.Name)
		return err
	}
	if _, err := s.Delivery(); err != nil {
		t.Remove(s.Namespace, s.Name)
		return err
	}
	if s.Name == t.refuse {
		t.Remove(s.Namespace, s.Name)
		return errors.New("refused")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.serving[s.Namespace+"/"+s.Name] = s.DeepCopy()
	return nil
}

func (t *targets) Remove(ns, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.serving, ns+"/"+name)
}

func (t *targets) has(ns, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.serving[ns+"/"+name]
	return ok
}

type env struct {
	ns      string
	nats    *natstest.Server
	js      jetstream.JetStream
	streams stream.Config
	rec     *subscription.Reconciler
	targets *targets
	c       client.Client
	reg     *prometheus.Registry
}

var nsCounter atomic.Int32

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, func(*stream.Config, *subscription.Reconciler) {})
}

// newEnvWith is newEnv with the streams and the reconciler as modify
// leaves them.
func newEnvWith(t *testing.T, modify func(*stream.Config, *subscription.Reconciler)) *env {
	t.Helper()
	e := &env{ns: fmt.Sprintf("test-%d", nsCounter.Add(1)), nats: natstest.Start(t), targets: &targets{serving: map[string]*v1alpha2.Subscription{}}, c: cluster.Client}
	e.js = e.nats.JetStream()
	e.streams = stream.DefaultConfig()
	e.streams.Storage = stream.StorageMemory
	e.rec = &subscription.Reconciler{Resync: 300 * time.Millisecond}
	modify(&e.streams, e.rec)
	require.NoError(t, jsstream.Ensure(context.Background(), e.js, e.streams))
	require.NoError(t, e.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))

	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:                 cluster.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// The test's namespaces only: the API server keeps the earlier
		// tests' Subscriptions, which would take consumers of this test's
		// stream.
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{e.ns: {}, e.ns + "-b": {}, e.ns + "-victim": {}}},
	})
	require.NoError(t, err)
	e.reg = prometheus.NewRegistry()
	e.rec.Client, e.rec.Metrics = mgr.GetClient(), e.reg
	e.rec.Applier.JetStream, e.rec.Applier.Streams = e.js, e.streams
	require.NoError(t, e.rec.SetupWithManager(mgr))
	require.NoError(t, (&feed.Feeder{Client: mgr.GetClient(), Targets: e.targets}).SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return e
}

func (e *env) service(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, e.c.Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}))
}

func (e *env) subscription(t *testing.T, name, sinkService string, modify ...func(*v1alpha2.Subscription)) *v1alpha2.Subscription {
	t.Helper()
	s := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha2.SubscriptionSpec{
			Sink:   fmt.Sprintf("http://%s.%s.svc.cluster.local", sinkService, e.ns),
			Source: "shop",
			Types:  []string{"order.created.v1", "order.paid.v1"},
		},
	}
	for _, m := range modify {
		m(s)
	}
	require.NoError(t, e.c.Create(context.Background(), s))
	return s
}

func (e *env) get(t *testing.T, name string) *v1alpha2.Subscription {
	t.Helper()
	var s v1alpha2.Subscription
	require.NoError(t, e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &s))
	return &s
}

// status returns the Subscription's status, the zero status when it
// cannot be read: conditions call it in Eventually's goroutine, where
// nothing may stop the test, and the zero status satisfies none of them.
func (e *env) status(name string) v1alpha2.SubscriptionStatus {
	var s v1alpha2.Subscription
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &s); err != nil {
		return v1alpha2.SubscriptionStatus{}
	}
	return s.Status
}

func (e *env) consumer(name string) (*jetstream.ConsumerInfo, error) {
	c, err := e.js.Consumer(context.Background(), e.streams.EventStream, stream.ConsumerName(e.ns, name))
	if err != nil {
		return nil, err
	}
	return c.Info(context.Background())
}

const wait = 20 * time.Second
const tick = 20 * time.Millisecond

// TestKymaTypeCleanupTutorial applies the Subscription of Kyma's tutorial
// "Event name cleanup in Subscriptions" as it writes it (a type with the
// prohibited *) and a second one whose type cleans to the same name, as
// Kyma's event-name documentation warns: both are stored, both become
// ready, status.types says the cleaned type Kyma's tutorial reads back
// (order.paymentsuccess.v1), and both consumers filter on the same
// subject: the collision Kyma documents, not an error.
func TestKymaTypeCleanupTutorial(t *testing.T) {
	e := newEnv(t)
	e.service(t, "lastorder")
	for name, typ := range map[string]string{"lastorder-payment-sub": "order.payment*success.v1", "colliding": "order.paymentsuccess.v1"} {
		e.subscription(t, name, "lastorder", func(s *v1alpha2.Subscription) {
			s.Spec.Source = "myapp"
			s.Spec.Types = []string{typ}
		})
	}
	for _, name := range []string{"lastorder-payment-sub", "colliding"} {
		require.Eventually(t, func() bool { return e.status(name).Ready }, wait, tick, name)
		info, err := e.consumer(name)
		require.NoError(t, err)
		assert.Equal(t, []string{"kyma.myapp.order.paymentsuccess.v1"}, info.Config.FilterSubjects, name)
	}
	assert.Equal(t, []v1alpha2.EventType{{OriginalType: "order.payment*success.v1", CleanType: "order.paymentsuccess.v1"}},
		e.get(t, "lastorder-payment-sub").Status.Types)
}

func TestValidSubscriptionBecomesReady(t *testing.T) {
	e := newEnv(t)
	e.service(t, "orders")
	e.subscription(t, "s", "orders", func(s *v1alpha2.Subscription) {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "4"}
	})

	require.Eventually(t, func() bool { return e.status("s").Ready }, wait, tick)
	s := e.get(t, "s")
	consumer := stream.ConsumerName(e.ns, "s")
	assert.Equal(t, []v1alpha2.EventType{{OriginalType: "order.created.v1", CleanType: "order.created.v1"}, {OriginalType: "order.paid.v1", CleanType: "order.paid.v1"}}, s.Status.Types)
	assert.Equal(t, []v1alpha2.JetStreamTypes{{OriginalType: "order.created.v1", ConsumerName: consumer}, {OriginalType: "order.paid.v1", ConsumerName: consumer}}, s.Status.Backend.Types)
	assert.Contains(t, s.Finalizers, subscription.Finalizer)
	for _, c := range s.Status.Conditions {
		assert.Equal(t, corev1.ConditionTrue, c.Status, c.Type)
	}

	info, err := e.consumer("s")
	require.NoError(t, err)
	assert.Equal(t, 4, info.Config.MaxAckPending)
	assert.Equal(t, []string{"kyma.shop.order.created.v1", "kyma.shop.order.paid.v1"}, info.Config.FilterSubjects)
	require.Eventually(t, func() bool { return e.targets.has(e.ns, "s") }, wait, tick, "the dispatcher serves it")

	// An update reaches the consumer.
	s.Spec.Config["maxInFlightMessages"] = "1"
	s.Spec.Types = []string{"order.shipped.v1"}
	require.NoError(t, e.c.Update(context.Background(), s))
	require.Eventually(t, func() bool {
		info, err := e.consumer("s")
		return err == nil && info.Config.MaxAckPending == 1 && info.Config.FilterSubjects[0] == "kyma.shop.order.shipped.v1"
	}, wait, tick)
	require.Eventually(t, func() bool {
		st := e.status("s")
		return len(st.Types) == 1 && st.Types[0].OriginalType == "order.shipped.v1"
	}, wait, tick)
}

func TestMissingServiceIsNotReadyUntilItExists(t *testing.T) {
	e := newEnv(t)
	e.subscription(t, "s", "later")
	require.Eventually(t, func() bool {
		st := e.status("s")
		c := st.FindCondition(v1alpha2.ConditionSubscriptionSpecValid)
		return c != nil && c.Status == corev1.ConditionFalse
	}, wait, tick)
	s := e.get(t, "s")
	assert.False(t, s.Status.Ready)
	c := s.Status.FindCondition(v1alpha2.ConditionSubscriptionSpecValid)
	assert.Equal(t, v1alpha2.ReasonSpecInvalid, c.Reason)
	assert.Contains(t, c.Message, fmt.Sprintf(`Service "later" does not exist in namespace %q`, e.ns))
	_, err := e.consumer("s")
	require.NoError(t, err, "the consumer is made: the events published until the Service exists wait for it")
	_, err = e.js.Publish(context.Background(), "kyma.shop.order.created.v1", []byte("{}"))
	require.NoError(t, err)

	e.service(t, "later")
	require.Eventually(t, func() bool { return e.status("s").Ready }, wait, tick, "a Service appearing re-validates")
	info, err := e.consumer("s")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.NumPending, "the event published meanwhile waits")
}

// TestInvalidSubscriptionKeepsItsEvents: a ready Subscription whose sink's
// Service is deleted (re-created, say) is not ready while it is gone, and
// its consumer stays with the events that wait and those published
// meanwhile; when the Service is back it is ready with all of them.
func TestInvalidSubscriptionKeepsItsEvents(t *testing.T) {
	e := newEnv(t)
	e.service(t, "fn")
	e.subscription(t, "s", "fn")
	require.Eventually(t, func() bool { return e.status("s").Ready }, wait, tick)
	publish := func() {
		_, err := e.js.Publish(context.Background(), "kyma.shop.order.created.v1", []byte("{}"))
		require.NoError(t, err)
	}
	publish()

	var svc corev1.Service
	require.NoError(t, e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "fn"}, &svc))
	require.NoError(t, e.c.Delete(context.Background(), &svc))
	require.Eventually(t, func() bool { return !e.status("s").Ready }, wait, tick, "not ready without its Service")
	active := e.get(t, "s").Status.FindCondition(v1alpha2.ConditionSubscriptionActive)
	assert.Contains(t, active.Message, "wait in consumer "+stream.ConsumerName(e.ns, "s"))
	publish()
	require.Never(t, func() bool { _, err := e.consumer("s"); return err != nil }, time.Second, 50*time.Millisecond, "the consumer stays through resyncs")

	e.service(t, "fn")
	require.Eventually(t, func() bool { return e.status("s").Ready }, wait, tick)
	info, err := e.consumer("s")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), info.NumPending, "the event of before and the one published meanwhile wait for delivery")
	assert.True(t, e.targets.has(e.ns, "s"))
}

func TestSinkInAnotherNamespaceIsRefused(t *testing.T) {
	e := newEnv(t)
	e.service(t, "fn")
	e.subscription(t, "s", "fn", func(s *v1alpha2.Subscription) { s.Spec.Sink = "http://fn.kube-system.svc.cluster.local" })
	require.Eventually(t, func() bool {
		st := e.status("s")
		c := st.FindCondition(v1alpha2.ConditionSubscriptionSpecValid)
		return c != nil && c.Status == corev1.ConditionFalse
	}, wait, tick)
	s := e.get(t, "s")
	assert.False(t, s.Status.Ready)
	assert.Contains(t, s.Status.FindCondition(v1alpha2.ConditionSubscriptionSpecValid).Message, `the Service must be in the Subscription's namespace`)
	require.Never(t, func() bool { return e.targets.has(e.ns, "s") }, 300*time.Millisecond, tick, "never dispatched")
}

func TestDeletedSubscriptionLosesItsConsumer(t *testing.T) {
	e := newEnv(t)
	e.service(t, "fn")
	e.subscription(t, "s", "fn")
	require.Eventually(t, func() bool { return e.status("s").Ready }, wait, tick)
	require.NoError(t, e.c.Delete(context.Background(), e.get(t, "s")))
	require.Eventually(t, func() bool {
		err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "s"}, &v1alpha2.Subscription{})
		return apierrors.IsNotFound(err)
	}, wait, tick, "the finalizer lets go")
	_, err := e.consumer("s")
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
	require.Eventually(t, func() bool { return !e.targets.has(e.ns, "s") }, wait, tick)
}

func TestConsumerRecreatedAfterNATSLoss(t *testing.T) {
	e := newEnv(t)
	e.service(t, "fn")
	e.subscription(t, "s", "fn")
	require.Eventually(t, func() bool { return e.status("s").Ready }, wait, tick)

	e.nats.Wipe() // NATS restarted with nothing: no stream, no consumer
	require.Eventually(t, func() bool { return e.js.Conn().IsConnected() }, wait, tick)
	require.NoError(t, e.rec.RequeueAll(context.Background()))
	require.Eventually(t, func() bool { _, err := e.consumer("s"); return err == nil }, wait, tick, "stream and consumer recreated")
	// The consumer exists before the status that says so is written (a
	// reconcile during the loss may have written not ready meanwhile, or
	// none did, and ready is still the one of before the loss).
	require.Eventually(t, func() bool {
		st := e.status("s")
		return st.Ready && st.FindCondition(v1alpha2.ConditionEventsKept) != nil
	}, wait, tick, "ready again, and the loss is told")
	lost := e.get(t, "s").Status.FindCondition(v1alpha2.ConditionEventsKept)
	assert.Equal(t, corev1.ConditionFalse, lost.Status)
	assert.Equal(t, v1alpha2.ReasonConsumerLost, lost.Reason)
	assert.Equal(t, 1.0, counter(t, e.reg, "kfn_eventbridge_consumers_lost_total", map[string]string{"namespace": e.ns, "subscription": "s"}), "counted once")
}

// counter returns the value of the counter name with the given labels in
// reg, 0 when it has none. Other tests' Subscriptions live in the same API
// server, so a metric has series of theirs too.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
