package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/activation"
	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/internal/natsinflight"
	"github.com/kfn-dev/kfn/scaler"
	"github.com/kfn-dev/kfn/scaler/server"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/natsfault"
	"github.com/kfn-dev/kfn/test/scalertest"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Into(&cluster), testcluster.WithScheme(eventingv1alpha2.AddToScheme)))
}

func TestRunRefusesBadFlagsBeforeDoingAnything(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"unknown flag":           {args: []string{"-nope"}, wantErr: "flag provided but not defined"},
		"no NATS":                {args: []string{"-nats-url="}, wantErr: "-nats-url is required"},
		"no stream":              {args: []string{"-event-stream="}, wantErr: "-event-stream is required"},
		"no partitions":          {args: []string{"-partitions=0"}, wantErr: "-partitions must be between 1 and 16, not 0"},
		"too many partitions":    {args: []string{"-partitions=17"}, wantErr: "-partitions must be between 1 and 16, not 17"},
		"cert without key":       {args: []string{"-tls-cert-file=c.pem"}, wantErr: "go together"},
		"client CA without cert": {args: []string{"-tls-client-ca-file=ca.pem"}, wantErr: "needs -tls-cert-file"},
		"missing cert files":     {args: []string{"-tls-cert-file=/nonexistent/c.pem", "-tls-key-file=/nonexistent/k.pem"}, wantErr: "TLS file"},
		"too fast a refresh":     {args: []string{"-refresh-interval=1ms"}, wantErr: "at least 10ms"},
		"bad log level":          {args: []string{"-log-level=loud"}, wantErr: "-log-level"},
		"claim hold over 1m":     {args: []string{"-claim-hold=2m"}, wantErr: "between 0 and 1m"},
		"claim hold, no answers": {args: []string{"-claim-hold=100ms", "-claimed-subject="}, wantErr: "-claim-hold needs"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := component().Execute(context.Background(), tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	require.NoError(t, component().Execute(context.Background(), []string{"-h"}, io.Discard), "help is no failure")
	cfg := scaler.DefaultProcess()
	require.NoError(t, cfg.Validate(), "the defaults are valid")
}

// TestServesKEDA runs the scaler as the chart does (the chart's flags)
// against the test API server and an embedded NATS, and talks to it with
// KEDA's generated client.
func TestServesKEDA(t *testing.T) {
	ctx := context.Background()
	n := scalertest.StartNATS(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scaler-"}}
	require.NoError(t, cluster.Client.Create(ctx, ns))
	sub := scalertest.Subscription(ns.Name, "orders-created", "orders", "shop", "order.created.v1")
	require.NoError(t, cluster.Client.Create(ctx, sub))
	n.CreateConsumer(t, sub)

	grpcAddr, metricsAddr := testport.Addr(t), testport.Addr(t)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var logs logtest.Buffer
	go func() {
		done <- component().Execute(rctx, []string{
			"-nats-url=" + n.Server.ClientURL(),
			"-event-stream=" + n.Streams.EventStream,
			"-listen=" + grpcAddr,
			"-metrics-listen=" + metricsAddr,
			"-refresh-interval=100ms",
			"-claim-hold=1m",
			"-log-level=debug",
		}, &logs)
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	require.Eventually(t, func() bool {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: server.ServiceName})
		return err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING
	}, 30*time.Second, 20*time.Millisecond, "the scaler serves gRPC health")
	assert.Equal(t, http.StatusOK, get(t, "http://"+metricsAddr+"/readyz").code)

	keda := pb.NewExternalScalerClient(conn)
	fn := types.NamespacedName{Namespace: ns.Name, Name: "orders"}
	ref := &pb.ScaledObjectRef{Name: fn.Name, Namespace: fn.Namespace, ScalerMetadata: trigger.Metadata{
		ScalerAddress: grpcAddr, Function: fn, TargetBacklog: 5, TargetConcurrency: 2,
	}.Render()}
	metric := func(name string) func() (int64, error) {
		return func() (int64, error) {
			resp, err := keda.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: name})
			if err != nil {
				return 0, err
			}
			return resp.MetricValues[0].MetricValue, nil
		}
	}
	eventually(t, metric(server.MetricBacklog), 0)
	spec, err := keda.GetMetricSpec(ctx, ref)
	require.NoError(t, err)
	assert.Equal(t, int64(5), spec.MetricSpecs[0].TargetSize)

	// At zero, idle: the first event is published for the event bridges
	// to claim a standby pod, and pushed to KEDA's stream once a bridge
	// says the claim ended (-claim-hold).
	active, err := keda.IsActive(ctx, ref)
	require.NoError(t, err)
	require.False(t, active.Result)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stream, err := keda.StreamIsActive(sctx, ref)
	require.NoError(t, err)
	// The stream is registered once the server has it; give it a refresh to
	// have the listener in place, then publish.
	eventually(t, func() (int64, error) {
		v, err := metricValue("http://"+metricsAddr+"/metrics", "kfn_scaler_watchers")
		return int64(v), err
	}, 1)
	activations, err := n.Conn.SubscribeSync(activation.DefaultSubject)
	require.NoError(t, err)
	n.Publish(t, "shop", "order.created.v1", "1")
	got := make(chan bool, 1)
	go func() {
		r, err := stream.Recv()
		got <- err == nil && r.Result
	}()
	m, err := activations.NextMsg(10 * time.Second)
	require.NoError(t, err, "the activation is published for the bridges")
	claimed, err := activation.Decode(m.Data)
	require.NoError(t, err)
	require.Equal(t, fn, claimed)
	select {
	case <-got:
		t.Fatal("KEDA was told before the bridge said the claim ended")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, n.Conn.Publish(activation.ClaimedSubject, activation.Encode(fn)))
	select {
	case ok := <-got:
		require.True(t, ok, "StreamIsActive sends true")
	case <-time.After(10 * time.Second):
		t.Fatal("no activation within 10s")
	}
	eventually(t, metric(server.MetricBacklog), 1)

	// Gateway requests reported over NATS count, in every replica.
	pub, err := natsinflight.NewPublisher(n.Conn)
	require.NoError(t, err)
	pub.ReportInFlight("eventbridge-0", map[types.NamespacedName]int{fn: 3}, time.Minute)
	eventually(t, metric(server.MetricConcurrency), 3)

	body := get(t, "http://"+metricsAddr+"/metrics").body
	for _, m := range []string{"kfn_scaler_refresh_seconds", "kfn_scaler_activations_total", `kfn_scaler_activation_holds_total{ended_by="claim_ended"} 1`, "kfn_scaler_grpc_requests_total", "go_goroutines"} {
		assert.Contains(t, body, m)
	}

	// SIGTERM: a clean stop.
	cancel()
	stopped = true
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the scaler did not stop within 20s")
	}
	logtest.CheckLayout(t, logs.String(), "scaler", "grpc", "inflight")
}

func eventually(t *testing.T, f func() (int64, error), want int64) {
	t.Helper()
	var got int64
	var err error
	require.Eventually(t, func() bool {
		got, err = f()
		return err == nil && got == want
	}, 10*time.Second, 20*time.Millisecond, "want %d, last %d (%v)", want, got, err)
}

type response struct {
	code int
	body string
}

func get(t *testing.T, url string) response {
	t.Helper()
	r, err := fetch(url)
	require.NoError(t, err)
	return r
}

// fetch is get for conditions, which run in Eventually's goroutine and
// must not stop the test: it returns the error.
func fetch(url string) (response, error) {
	resp, err := http.Get(url)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{resp.StatusCode, string(b)}, nil
}

// metricValue returns the value of an unlabelled metric in a Prometheus
// text page, -1 when absent.
func metricValue(url, name string) (float64, error) {
	r, err := fetch(url)
	if err != nil {
		return 0, err
	}
	var v float64 = -1
	for _, line := range strings.Split(r.body, "\n") {
		if _, err := fmt.Sscanf(line, name+" %g", &v); err == nil {
			return v, nil
		}
	}
	return -1, nil
}

// TestEndsWhenNATSClosesItsConnection runs the scaler through a proxy that
// then closes its connection the way NATS does after a protocol error:
// nats.go gives it up for good, /healthz says so, and the scaler ends with
// the reason (the kubelet starts it again). A cut connection before that
// only reconnects.
func TestEndsWhenNATSClosesItsConnection(t *testing.T) {
	n := scalertest.StartNATS(t)
	proxy := natsfault.Start(t, n.Server.ClientURL())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
	metricsAddr := testport.Addr(t)
	done := make(chan error, 1)
	go func() {
		done <- component().Execute(context.Background(), []string{
			"-nats-url=" + proxy.URL(), "-event-stream=" + n.Streams.EventStream,
			"-listen=" + testport.Addr(t), "-metrics-listen=" + metricsAddr,
		}, io.Discard)
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "the scaler is up")

	require.Positive(t, proxy.Cut())
	require.Never(t, func() bool { return len(done) > 0 }, 500*time.Millisecond, 20*time.Millisecond, "a cut connection comes back: the scaler goes on")
	assert.Equal(t, http.StatusOK, get(t, "http://"+metricsAddr+"/healthz").code)

	require.Eventually(t, func() bool { return proxy.Refuse("Maximum Control Line Exceeded") > 0 }, 10*time.Second, 20*time.Millisecond)
	select {
	case err := <-done:
		require.ErrorIs(t, err, natsconn.ErrLost)
	case <-time.After(20 * time.Second):
		t.Fatal("the scaler went on without a NATS connection that cannot come back")
	}
}
