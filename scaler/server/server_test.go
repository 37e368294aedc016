package server_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/scalertest"
)

const (
	ns        = "shop"
	source    = "shop"
	eventType = "order.created.v1"
)

// env is a scaler on an embedded NATS, served over a real loopback gRPC
// listener, and KEDA's own generated client of it.
type env struct {
	nats   *scalertest.NATS
	core   *activity.Scaler
	reads  *countingReader
	client pb.ExternalScalerClient
	conn   *grpc.ClientConn
}

type countingReader struct {
	activity.BacklogReader
	n atomic.Int64
}

func (r *countingReader) Backlogs(ctx context.Context) (map[string]uint64, error) {
	r.n.Add(1)
	return r.BacklogReader.Backlogs(ctx)
}

// newEnv starts the scaler without its refresh loop: tests step it with
// Refresh, so every metric they read is exact.
func newEnv(t *testing.T, opts ...activity.Option) *env {
	t.Helper()
	n := scalertest.StartNATS(t)
	reads := &countingReader{BacklogReader: activity.NewJetStreamReader(n.JS, n.Streams)}
	core, err := activity.New(reads, activity.NewNATSListener(scalertest.Connect(t, n.Server.ClientURL())),
		append([]activity.Option{activity.WithActivationHold(0)}, opts...)...)
	require.NoError(t, err)
	srv, err := server.New(core)
	require.NoError(t, err)
	e := &env{nats: n, core: core, reads: reads}
	e.conn, e.client = serve(t, srv)
	return e
}

func serve(t *testing.T, srv *server.Server) (*grpc.ClientConn, pb.ExternalScalerClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn, pb.NewExternalScalerClient(conn)
}

func (e *env) refresh(t *testing.T) {
	t.Helper()
	require.NoError(t, e.core.Refresh(context.Background()))
}

// subscribe makes a Subscription feeding fn, its consumer, and tells the
// scaler about it.
func (e *env) subscribe(t *testing.T, name, fn string) (*eventingv1alpha2.Subscription, jetstream.Consumer) {
	t.Helper()
	sub := scalertest.Subscription(ns, name, fn, source+"-"+fn, eventType)
	c := e.nats.CreateConsumer(t, sub)
	require.NoError(t, e.core.Upsert(sub))
	return sub, c
}

// ref is the ScaledObjectRef KEDA sends for a trigger written by the
// controller.
func ref(fn string, md ...string) *pb.ScaledObjectRef {
	m := map[string]string{
		"scalerAddress":              "kfn-scaler:9090",
		trigger.KeyFunctionNamespace: ns,
		trigger.KeyFunctionName:      fn,
	}
	for i := 0; i+1 < len(md); i += 2 {
		m[md[i]] = md[i+1]
	}
	return &pb.ScaledObjectRef{Name: fn, Namespace: ns, ScalerMetadata: m}
}

func (e *env) backlog(t *testing.T, fn string) int64 {
	t.Helper()
	n, err := e.readBacklog(fn)
	require.NoError(t, err)
	return n
}

// readBacklog asks for fn's backlog metric as KEDA does; unlike backlog it
// does not fail the test, so conditions awaited with Eventually can use it.
func (e *env) readBacklog(fn string) (int64, error) {
	resp, err := e.client.GetMetrics(context.Background(), &pb.GetMetricsRequest{ScaledObjectRef: ref(fn), MetricName: server.MetricBacklog})
	if err != nil {
		return 0, err
	}
	if len(resp.MetricValues) != 1 {
		return 0, fmt.Errorf("%d metric values, want 1", len(resp.MetricValues))
	}
	v := resp.MetricValues[0]
	if float64(v.MetricValue) != v.MetricValueFloat {
		return 0, fmt.Errorf("metric value %d and float %v differ", v.MetricValue, v.MetricValueFloat)
	}
	return v.MetricValue, nil
}

// awaitBacklog refreshes the scaler until fn's backlog is want. JetStream
// counts a consumer's pending messages from a signal loop of its own, so
// consumer info read right after a publish is acknowledged can lag behind
// it (on a loaded machine, for tens of milliseconds); what a refresh reads
// after acknowledgements and fetches is exact.
func (e *env) awaitBacklog(t *testing.T, fn string, want int64, msg string) {
	t.Helper()
	var got int64
	var err error
	assert.Eventually(t, func() bool {
		if err = e.core.Refresh(context.Background()); err != nil {
			return false
		}
		got, err = e.readBacklog(fn)
		return err == nil && got == want
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, err, msg)
	require.Equal(t, want, got, "%s: backlog of %s", msg, fn)
}

func (e *env) active(t *testing.T, fn string) bool {
	t.Helper()
	resp, err := e.client.IsActive(context.Background(), ref(fn))
	require.NoError(t, err)
	return resp.Result
}

func publish(t *testing.T, e *env, fn string, n int) {
	t.Helper()
	for range n {
		e.nats.Publish(t, source+"-"+fn, eventType, time.Now().Format(time.RFC3339Nano))
	}
}

func TestMetricsFollowBacklogAsEventsArePublishedAndAcked(t *testing.T) {
	e := newEnv(t)
	_, c := e.subscribe(t, "orders-created", "orders")
	e.refresh(t)
	assert.Equal(t, int64(0), e.backlog(t, "orders"), "no events yet")
	assert.False(t, e.active(t, "orders"))

	publish(t, e, "orders", 5)
	e.awaitBacklog(t, "orders", 5, "5 published, none delivered")
	assert.True(t, e.active(t, "orders"))

	batch, err := c.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	require.NoError(t, batch.Error())
	require.Len(t, msgs, 3)
	e.refresh(t)
	assert.Equal(t, int64(5), e.backlog(t, "orders"), "3 delivered but unacknowledged still count")

	for _, m := range msgs[:2] {
		require.NoError(t, m.DoubleAck(context.Background()))
	}
	e.refresh(t)
	assert.Equal(t, int64(3), e.backlog(t, "orders"), "2 acknowledged")

	require.NoError(t, msgs[2].DoubleAck(context.Background()))
	publish(t, e, "orders", 1)
	e.awaitBacklog(t, "orders", 3, "1 acked, 1 more published")

	batch, err = c.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(context.Background()))
	}
	require.NoError(t, batch.Error())
	e.refresh(t)
	assert.Equal(t, int64(0), e.backlog(t, "orders"), "drained")
	assert.False(t, e.active(t, "orders"), "drained and no requests: inactive")
}

func TestMetricSpecTargetsFromTriggerMetadata(t *testing.T) {
	e := newEnv(t)
	tests := map[string]struct {
		md                   []string
		backlog, concurrency int64
		code                 codes.Code
	}{
		"defaults from the api package": {backlog: 10, concurrency: 10},
		"set by the controller":         {md: []string{trigger.KeyTargetBacklog, "25", trigger.KeyTargetConcurrency, "3"}, backlog: 25, concurrency: 3},
		"zero target refused":           {md: []string{trigger.KeyTargetBacklog, "0"}, code: codes.InvalidArgument},
		"not a number refused":          {md: []string{trigger.KeyTargetConcurrency, "ten"}, code: codes.InvalidArgument},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, err := e.client.GetMetricSpec(context.Background(), ref("orders", tc.md...))
			if tc.code != codes.OK {
				assert.Equal(t, tc.code, status.Code(err), "error %v", err)
				return
			}
			require.NoError(t, err)
			require.Len(t, resp.MetricSpecs, 2)
			assert.Equal(t, server.MetricBacklog, resp.MetricSpecs[0].MetricName)
			assert.Equal(t, float64(tc.backlog), resp.MetricSpecs[0].TargetSizeFloat)
			assert.Equal(t, server.MetricConcurrency, resp.MetricSpecs[1].MetricName)
			assert.Equal(t, float64(tc.concurrency), resp.MetricSpecs[1].TargetSizeFloat)
		})
	}
}

func TestFunctionFallsBackToScaledObjectName(t *testing.T) {
	e := newEnv(t)
	e.subscribe(t, "orders-created", "orders")
	publish(t, e, "orders", 2)
	e.awaitBacklog(t, "orders", 2, "2 published")
	resp, err := e.client.GetMetrics(context.Background(), &pb.GetMetricsRequest{
		ScaledObjectRef: &pb.ScaledObjectRef{Name: "orders", Namespace: ns, ScalerMetadata: map[string]string{"scalerAddress": "x"}},
		MetricName:      server.MetricBacklog,
	})
	require.NoError(t, err)
	assert.Equal(t, int64(2), resp.MetricValues[0].MetricValue)
}

// TestAnotherNamespacesFunctionIsRefused: a ScaledObject of namespace spy
// whose metadata names shop's Function (a tenant may create ScaledObjects
// and name kfn's ClusterTriggerAuthentication) learns nothing of it: every
// call is InvalidArgument, and shop's own ScaledObject is answered.
func TestAnotherNamespacesFunctionIsRefused(t *testing.T) {
	e := newEnv(t)
	e.subscribe(t, "orders-created", "orders")
	publish(t, e, "orders", 2)
	e.awaitBacklog(t, "orders", 2, "2 published")
	spy := &pb.ScaledObjectRef{Name: "spy", Namespace: "spy", ScalerMetadata: map[string]string{"functionNamespace": ns, "functionName": "orders"}}
	ctx := context.Background()
	_, err := e.client.IsActive(ctx, spy)
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "IsActive")
	_, err = e.client.GetMetricSpec(ctx, spy)
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "GetMetricSpec")
	_, err = e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: spy, MetricName: server.MetricBacklog})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "GetMetrics")
	s, err := e.client.StreamIsActive(ctx, spy)
	require.NoError(t, err)
	_, err = s.Recv()
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "StreamIsActive")

	own := &pb.ScaledObjectRef{Name: "orders", Namespace: ns, ScalerMetadata: map[string]string{"functionNamespace": ns, "functionName": "orders"}}
	resp, err := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: own, MetricName: server.MetricBacklog})
	require.NoError(t, err)
	assert.Equal(t, int64(2), resp.MetricValues[0].MetricValue)
}

// stream opens StreamIsActive as KEDA does and forwards what it receives.
func stream(t *testing.T, e *env, fn string) <-chan bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.client.StreamIsActive(ctx, ref(fn))
	require.NoError(t, err)
	out := make(chan bool, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			out <- r.Result
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

func receive(t *testing.T, ch <-chan bool, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case v := <-ch:
		require.True(t, v, "StreamIsActive sends only true")
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("no activation within %s", within)
		return 0
	}
}

func TestActivationOncePerTransition(t *testing.T) {
	e := newEnv(t)
	_, c := e.subscribe(t, "orders-created", "orders")
	active := stream(t, e, "orders")
	// Inactive: the scaler listens on the Function's subjects. (If the
	// stream registers only after the event below, it opens with the one
	// true instead: once either way.)
	e.refresh(t)

	// The first event is pushed without waiting for any refresh.
	publish(t, e, "orders", 1)
	took := receive(t, active, 5*time.Second)
	t.Logf("first event -> StreamIsActive true: %s", took)

	// More events and refreshes while active: no more trues.
	publish(t, e, "orders", 3)
	for range 3 {
		e.refresh(t)
	}
	e.awaitBacklog(t, "orders", 4, "4 published")

	// Drain: inactive at the next refresh.
	batch, err := c.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(context.Background()))
	}
	e.refresh(t)
	require.False(t, e.active(t, "orders"))

	// Second transition, by event.
	publish(t, e, "orders", 1)
	receive(t, active, 5*time.Second)

	// Third transition, by a gateway request to the (drained) Function.
	batch, err = c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(context.Background()))
	}
	e.refresh(t)
	require.False(t, e.active(t, "orders"))
	fn := types.NamespacedName{Namespace: ns, Name: "orders"}
	e.core.ReportInFlight("gateway-0", map[types.NamespacedName]int{fn: 1}, time.Minute)
	receive(t, active, 5*time.Second)
	resp, err := e.client.GetMetrics(context.Background(), &pb.GetMetricsRequest{ScaledObjectRef: ref("orders"), MetricName: server.MetricConcurrency})
	require.NoError(t, err)
	assert.Equal(t, int64(1), resp.MetricValues[0].MetricValue, "the held request counts")
	e.core.ReportInFlight("gateway-0", nil, time.Minute)
	e.refresh(t)
	require.False(t, e.active(t, "orders"))

	// Exactly three trues for three transitions: nothing else is on the
	// way (the server sends synchronously on each transition; give a
	// stray one time to arrive).
	select {
	case v := <-active:
		t.Fatalf("unexpected extra activation message %v", v)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestStreamOpenedWhileActiveStartsWithTrue(t *testing.T) {
	e := newEnv(t)
	e.subscribe(t, "orders-created", "orders")
	publish(t, e, "orders", 1)
	e.awaitBacklog(t, "orders", 1, "1 published")
	require.True(t, e.active(t, "orders"))
	// A reconnecting KEDA learns at once that work is waiting.
	receive(t, stream(t, e, "orders"), 5*time.Second)
}

func TestMissingConsumerIsAnError(t *testing.T) {
	e := newEnv(t)
	sub := scalertest.Subscription(ns, "orders-created", "orders", source, eventType)
	require.NoError(t, e.core.Upsert(sub)) // no consumer in JetStream
	e.refresh(t)

	_, err := e.client.GetMetrics(context.Background(), &pb.GetMetricsRequest{ScaledObjectRef: ref("orders"), MetricName: server.MetricBacklog})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "error %v", err)
	b, berr := activity.BindingFor(sub)
	require.NoError(t, berr)
	assert.Contains(t, err.Error(), b.Consumer)
	_, err = e.client.IsActive(context.Background(), ref("orders"))
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))

	// A Function with no Subscription at all is simply idle.
	assert.Equal(t, int64(0), e.backlog(t, "no-subscriptions"))

	e.nats.CreateConsumer(t, sub)
	e.refresh(t)
	assert.Equal(t, int64(0), e.backlog(t, "orders"), "consumer created: a number again")
}

func TestUnreachableNATSIsAnError(t *testing.T) {
	e := newEnv(t, activity.WithReadTimeout(500*time.Millisecond))
	e.subscribe(t, "orders-created", "orders")
	e.refresh(t)
	assert.Equal(t, int64(0), e.backlog(t, "orders"))

	e.nats.Server.Shutdown()
	e.nats.Server.WaitForShutdown()
	require.ErrorIs(t, e.core.Refresh(context.Background()), activity.ErrBacklogUnavailable)
	_, err := e.client.GetMetrics(context.Background(), &pb.GetMetricsRequest{ScaledObjectRef: ref("orders"), MetricName: server.MetricBacklog})
	assert.Equal(t, codes.Unavailable, status.Code(err), "error %v", err)
}

func TestBeforeFirstRefreshIsUnavailable(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.GetMetrics(context.Background(), &pb.GetMetricsRequest{ScaledObjectRef: ref("orders"), MetricName: server.MetricBacklog})
	assert.Equal(t, codes.Unavailable, status.Code(err))
}

func TestManyFunctionsOneRefreshLoop(t *testing.T) {
	const functions = 200
	e := newEnv(t, activity.WithRefreshInterval(50*time.Millisecond))
	for i := range functions {
		e.subscribe(t, "sub-"+itoa(i), "fn-"+itoa(i))
	}
	for i := range functions {
		publish(t, e, "fn-"+itoa(i), i%4)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.core.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	// Every backlog as published (JetStream's pending counts can trail the
	// publishes briefly; see awaitBacklog), then the questions.
	require.Eventually(t, func() bool {
		for i := range functions {
			if n, err := e.readBacklog("fn-" + itoa(i)); err != nil || n != int64(i%4) {
				return false
			}
		}
		return e.reads.n.Load() >= 2
	}, 10*time.Second, 10*time.Millisecond)
	before := e.reads.n.Load()
	for i := range functions {
		assert.Equal(t, int64(i%4), e.backlog(t, "fn-"+itoa(i)), "fn-%d", i)
		assert.Equal(t, i%4 > 0, e.active(t, "fn-"+itoa(i)), "fn-%d", i)
	}
	// 400 questions were answered from memory: the loop's own ticks are the
	// only reads (one per 50ms, far fewer than the questions).
	assert.Less(t, e.reads.n.Load()-before, int64(functions), "reads during %d questions", 2*functions)
}

func TestHealthService(t *testing.T) {
	e := newEnv(t)
	h := healthpb.NewHealthClient(e.conn)
	for _, svc := range []string{"", server.ServiceName} {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.Status, "service %q", svc)
	}
}

func itoa(i int) string {
	return string(rune('a'+i/26/26%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
}
