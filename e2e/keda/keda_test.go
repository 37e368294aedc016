package keda

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	kedacontrollers "github.com/kedacore/keda/v2/controllers/keda"
	"github.com/kedacore/keda/v2/pkg/eventemitter"
	"github.com/kedacore/keda/v2/pkg/k8s"
	"github.com/kedacore/keda/v2/pkg/scalers/authentication"
	"github.com/kedacore/keda/v2/pkg/scaling"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/scaler"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/scalertest"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// kedaCRDs returns the directory of KEDA's CRDs in the keda module this
// module builds with, as a KEDA installation applies them.
func kedaCRDs(t *testing.T) string {
	t.Helper()
	return filepath.Join(testcluster.ModuleDir(t, "github.com/kedacore/keda/v2"), "config", "crd", "bases")
}

// platform is everything the scenario runs in-process: the API server,
// NATS JetStream, kfn's controller and scaler, and KEDA's operator.
type platform struct {
	cluster *testcluster.Cluster
	nats    *scalertest.NATS
	core    *activity.Scaler
	// observed is the core as the scaler's gRPC server, and so KEDA, sees
	// it: it tells KEDA's polls from the external-push stream.
	observed *observedCore
	// run runs f until the test ends.
	run func(f func(context.Context) error)
}

// observedCore is the scaler's core as KEDA reaches it through the gRPC
// server, counting how: State answers KEDA's polls (IsActive, GetMetrics),
// Watch feeds the external-push stream (StreamIsActive), which sends true
// when it opens on an active Function and on each activation after.
type observedCore struct {
	server.Core
	polls  atomic.Int64 // State calls
	pushes atomic.Int64 // activations handed to a StreamIsActive stream
}

var _ server.Core = (*observedCore)(nil)

func (c *observedCore) State(fn types.NamespacedName) (activity.State, error) {
	c.polls.Add(1)
	return c.Core.State(fn)
}

func (c *observedCore) Watch(fn types.NamespacedName) (bool, <-chan struct{}, func()) {
	active, in, cancel := c.Core.Watch(fn)
	if active {
		c.pushes.Add(1)
	}
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-in:
				c.pushes.Add(1)
				select {
				case out <- struct{}{}:
				default: // merged into the unread one, as the core does
				}
			}
		}
	}()
	var once sync.Once
	return active, out, func() { once.Do(func() { cancel(); close(stop) }) }
}

// start runs everything but KEDA's operator, which startKEDA runs, so that
// a test can set what KEDA must find when it first reads a ScaledObject.
func start(t *testing.T) *platform {
	t.Helper()
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	cluster := testcluster.New(t,
		testcluster.WithCRDPaths(kedaCRDs(t)),
		testcluster.WithScheme(serverlessv1alpha2.AddToScheme, eventingv1alpha2.AddToScheme, kedav1alpha1.AddToScheme))
	p := &platform{cluster: cluster, nats: scalertest.StartNATS(t)}
	ctx, cancel := context.WithCancel(context.Background())
	var stops []chan error
	t.Cleanup(func() {
		cancel()
		for _, done := range stops {
			<-done
		}
	})
	run := func(f func(context.Context) error) {
		done := make(chan error, 1)
		stops = append(stops, done)
		go func() { done <- f(ctx) }()
	}
	p.run = run

	// kfn's scaler: core, gRPC server, Subscriptions from the API server.
	var err error
	p.core, err = activity.New(activity.NewJetStreamReader(p.nats.JS, p.nats.Streams),
		activity.NewNATSListener(scalertest.Connect(t, p.nats.Server.ClientURL())),
		activity.WithRefreshInterval(200*time.Millisecond))
	require.NoError(t, err)
	p.observed = &observedCore{Core: p.core}
	srv, err := server.New(p.observed)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	run(func(ctx context.Context) error { return srv.Serve(ctx, lis) })

	// kfn's controller and the scaler's feeder, in one manager.
	kfnScheme := runtime.NewScheme()
	require.NoError(t, function.AddToScheme(kfnScheme))
	kfnMgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme: kfnScheme, Cache: function.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	require.NoError(t, err)
	cfg := function.DefaultConfig()
	cfg.Resources.ScalerAddress = lis.Addr().String()
	r, err := function.NewReconciler(kfnMgr, cfg)
	require.NoError(t, err)
	require.NoError(t, r.SetupWithManager(ctx, kfnMgr))
	feeder := &feed.Feeder{Client: kfnMgr.GetClient(), Targets: p.core, Name: scaler.FeederName}
	require.NoError(t, feeder.SetupWithManager(kfnMgr))
	run(kfnMgr.Start)
	require.NoError(t, feeder.Prime(ctx, kfnMgr.GetCache()))
	run(p.core.Run)
	return p
}

// startKEDA runs KEDA's operator: its ScaledObject reconciler and scale
// handler, wired as KEDA's own main wires them (no metrics API server: see
// README).
func (p *platform) startKEDA(t *testing.T) {
	t.Helper()
	kedaScheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(kedaScheme))
	require.NoError(t, kedav1alpha1.AddToScheme(kedaScheme))
	kedaMgr, err := ctrl.NewManager(p.cluster.Config, ctrl.Options{
		Scheme: kedaScheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	require.NoError(t, err)
	scaleClient, _, err := k8s.InitScaleClient(kedaMgr)
	require.NoError(t, err)
	recorder := kedaMgr.GetEventRecorder("keda-operator")
	handler := scaling.NewScaleHandler(kedaMgr.GetClient(), scaleClient, kedaScheme, 5*time.Second, 5*time.Second, recorder, &authentication.AuthClientSet{})
	require.NoError(t, (&kedacontrollers.ScaledObjectReconciler{
		Client:       kedaMgr.GetClient(),
		Scheme:       kedaScheme,
		ScaleClient:  scaleClient,
		ScaleHandler: handler,
		EventEmitter: eventemitter.NewEventEmitter(kedaMgr.GetClient(), recorder, "e2e", nil),
	}).SetupWithManager(kedaMgr, controller.Options{}))
	p.run(kedaMgr.Start)
	kedaHandler = handler
}

// kedaHandler is KEDA's scale handler, asked for metrics as KEDA's metrics
// API server asks it for the HPA.
var kedaHandler scaling.ScaleHandler

func (p *platform) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "keda-e2e-"}}
	require.NoError(t, p.cluster.Client.Create(context.Background(), ns))
	return ns.Name
}

func (p *platform) replicas(t *testing.T, ns, name string) func() (int32, error) {
	return func() (int32, error) {
		var d appsv1.Deployment
		if err := p.cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return 0, err
		}
		if d.Spec.Replicas == nil {
			return 1, nil
		}
		return *d.Spec.Replicas, nil
	}
}

func waitReplicas(t *testing.T, get func() (int32, error), want int32, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got int32
	var err error
	require.Eventually(t, func() bool {
		got, err = get()
		return err == nil && got == want
	}, within, 10*time.Millisecond, "replicas: want %d, last %d (%v)", want, got, err)
	return time.Since(start)
}

// TestScaleFromZeroAndBackWithKEDA is the scenario of issue 6 with the
// real KEDA.
func TestScaleFromZeroAndBackWithKEDA(t *testing.T) {
	p := start(t)
	ctx := context.Background()
	c := p.cluster.Client
	ns := p.namespace(t)
	const (
		cooldown = 2
		// pollEvery is KEDA's polling interval in this test, in seconds:
		// far above activationBound.
		pollEvery       = 3600
		activationBound = 10 * time.Second
	)

	fn := &serverlessv1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: ns},
		Spec: serverlessv1alpha2.FunctionSpec{
			Runtime: serverlessv1alpha2.NodeJS22,
			Source:  serverlessv1alpha2.Source{Inline: &serverlessv1alpha2.InlineSource{Source: "module.exports = { main: () => 'ok' };\n"}},
			ScaleConfig: &serverlessv1alpha2.ScaleConfig{
				MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](3),
				TargetBacklog: ptr.To[int32](4), CooldownPeriod: ptr.To[int32](cooldown),
			},
		},
	}
	require.NoError(t, c.Create(ctx, fn))
	sub := scalertest.Subscription(ns, "orders-created", "orders", "shop", "order.created.v1")
	require.NoError(t, c.Create(ctx, sub))
	consumer := p.nats.CreateConsumer(t, sub) // as the event bridge's reconciler does
	replicas := p.replicas(t, ns, "orders")
	so := &kedav1alpha1.ScaledObject{}

	t.Run("starts at zero replicas", func(t *testing.T) {
		require.Eventually(t, func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, so) == nil
		}, 30*time.Second, 20*time.Millisecond, "kfn's controller writes the ScaledObject")
		assert.Nil(t, so.Spec.PollingInterval, "kfn leaves KEDA's default polling interval, 30s")
		// KEDA polls when its scale loop starts and then every pollingInterval.
		// At an hour, far above the bound of the next step, only the
		// external-push stream can activate the Function in time. KEDA
		// starts after this, so it never runs a loop with another interval.
		patch := client.MergeFrom(so.DeepCopy())
		so.Spec.PollingInterval = ptr.To[int32](pollEvery)
		require.NoError(t, c.Patch(ctx, so, patch))
		p.startKEDA(t)
		waitReplicas(t, replicas, 0, 30*time.Second)
		require.Eventually(t, func() bool {
			_ = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, so)
			return len(so.Status.ExternalMetricNames) == 2
		}, 30*time.Second, 20*time.Millisecond, "KEDA read the metric spec")
		require.Eventually(t, func() bool { return p.observed.polls.Load() > 0 }, 30*time.Second, 20*time.Millisecond,
			"KEDA's scale loop made the poll it makes when it starts")
	})

	t.Run("scales to one on the first event, by push", func(t *testing.T) {
		polls, pushes := p.observed.polls.Load(), p.observed.pushes.Load()
		start := time.Now()
		p.nats.Publish(t, "shop", "order.created.v1", "1")
		took := waitReplicas(t, replicas, 1, activationBound)
		t.Logf("event published -> KEDA set replicas to 1: %s, by push (KEDA polls every %ds)", time.Since(start).Round(time.Millisecond), pollEvery)
		assert.Less(t, took, activationBound)
		assert.Equal(t, polls, p.observed.polls.Load(), "KEDA did not poll the scaler between the event and the activation")
		assert.Greater(t, p.observed.pushes.Load(), pushes, "the activation went to KEDA over the external-push stream")
	})

	t.Run("scales on backlog through the HPA's external metric", func(t *testing.T) {
		for i := 2; i <= 9; i++ {
			p.nats.Publish(t, "shop", "order.created.v1", fmt.Sprint(i))
		}
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		require.Eventually(t, func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keda-hpa-orders"}, hpa) == nil
		}, 30*time.Second, 20*time.Millisecond, "KEDA's HPA")
		assert.Equal(t, int32(3), hpa.Spec.MaxReplicas)
		var names []string
		for _, m := range hpa.Spec.Metrics {
			require.NotNil(t, m.External)
			names = append(names, m.External.Metric.Name)
			if strings.HasSuffix(m.External.Metric.Name, "-"+server.MetricBacklog) {
				assert.Equal(t, int64(4), m.External.Target.AverageValue.Value(), "targetBacklog per replica")
			}
		}
		assert.ElementsMatch(t, []string{"s0-" + server.MetricBacklog, "s0-" + server.MetricConcurrency}, names)
		// What KEDA's metrics API server would answer the HPA: 9 waiting.
		require.Eventually(t, func() bool {
			list, err := kedaHandler.GetScaledObjectMetrics(ctx, "orders", ns, "s0-"+server.MetricBacklog)
			return err == nil && len(list.Items) == 1 && list.Items[0].Value.Value() == 9
		}, 10*time.Second, 50*time.Millisecond, "the external metric is the backlog")
	})

	t.Run("back to zero after the backlog is drained and the cooldown", func(t *testing.T) {
		batch, err := consumer.Fetch(9, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			require.NoError(t, m.DoubleAck(ctx))
			n++
		}
		require.Equal(t, 9, n)
		// KEDA scales to zero from its polling loop only (a push never says
		// "inactive"): poll every second rather than wait up to 30s.
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, so))
		patch := client.MergeFrom(so.DeepCopy())
		so.Spec.PollingInterval = ptr.To[int32](1)
		require.NoError(t, c.Patch(ctx, so, patch))
		took := waitReplicas(t, replicas, 0, 30*time.Second)
		t.Logf("drained -> KEDA set replicas to 0: %s", took.Round(time.Millisecond))
	})
}
