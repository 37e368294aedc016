package eventbridge_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/internal/natsinflight"
	"github.com/kfn-dev/kfn/test/natstest"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// functionSlice is the EndpointSlice of a Function's Service as the
// EndpointSlice controller keeps it (the Service's labels copied, one slice
// even at zero replicas). The test API server runs no controllers, so the
// test writes it by hand: with no address at zero, then with a ready one.
func functionSlice(ns, fn string, ready bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fn + "-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName:             fn,
			serverlessv1alpha2.LabelFunctionName:     fn,
			serverlessv1alpha2.LabelManagedBy:        serverlessv1alpha2.LabelManagedByValue,
			"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if ready {
		s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	}
	return s
}

// reports records the in-flight reports on the subject, as a scaler
// replica receives them.
type reports chan map[types.NamespacedName]int

func (r reports) ReportInFlight(_ string, counts map[types.NamespacedName]int, _ time.Duration) {
	r <- counts
}

// TestGatewayInACluster runs the event bridge's gateway against a real API
// server and NATS: a request for a Function at zero is held, the scalers
// hear of it over NATS at once, and it is proxied once the Function's
// Service has a ready endpoint; unknown Functions are refused, and a
// Function that never gets ready is answered 503 after the hold timeout.
func TestGatewayInACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	cluster := testcluster.New(t, testcluster.WithScheme(v1alpha2.AddToScheme))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
	c := cluster.Client
	bg := context.Background()
	const ns = "shop"
	require.NoError(t, c.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	// The Function's pods, reached through -resolve (no cluster DNS here).
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer backend.Close()

	natsSrv := natstest.Start(t)
	nc, err := nats.Connect(natsSrv.URL())
	require.NoError(t, err)
	defer nc.Close()
	got := make(reports, 100)
	stop, err := natsinflight.Subscribe(nc, got)
	require.NoError(t, err)
	defer stop()

	cfg := eventbridge.DefaultProcess()
	cfg.NATSURL = natsSrv.URL()
	cfg.Components = []string{eventbridge.ComponentGateway}
	cfg.GatewayAuth = eventbridge.GatewayAuthNone // who may call: TestGatewayCallersAsRBACAllows
	cfg.MetricsAuth = eventbridge.MetricsAuthNone // who may read: TestRunInACluster
	cfg.GatewayListen, cfg.AdminListen, cfg.MetricsListen = testport.Addr(t), "", testport.Addr(t)
	cfg.Gateway.HoldTimeout = 2 * time.Second
	cfg.LeaderElection = false
	cfg.Resolve = map[string]string{"orders." + ns: backend.URL, "idle." + ns: backend.URL}
	cfg.Dispatcher.Egress.AllowLoopback = true // the backend listens there
	require.NoError(t, c.Create(bg, functionSlice(ns, "orders", false)))
	require.NoError(t, c.Create(bg, functionSlice(ns, "idle", false)))
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- eventbridge.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "a clean shutdown")
		case <-time.After(20 * time.Second):
			t.Error("the event bridge did not stop within 20s")
		}
	})
	base := "http://" + cfg.GatewayListen

	// Unknown: refused at once (the gateway serves only once the
	// EndpointSlices are in, so this is an answer, not a race).
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = http.Get(base + "/" + ns + "/nope/")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	// At zero: held; the scalers hear of it at once.
	type result struct {
		code      int
		body      string
		coldStart string
	}
	held := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/" + ns + "/orders/hello?x=1")
		if err != nil {
			held <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		held <- result{resp.StatusCode, string(b), resp.Header.Get(gateway.ColdStartHeader)}
	}()
	fn := types.NamespacedName{Namespace: ns, Name: "orders"}
	select {
	case counts := <-got:
		assert.Equal(t, 1, counts[fn], "the held request is in flight")
	case <-time.After(5 * time.Second):
		t.Fatal("no in-flight report reached the scaler's subject")
	}
	select {
	case r := <-held:
		t.Fatalf("answered while at zero: %+v", r)
	default:
	}

	// KEDA scales it up: a ready endpoint; the held request goes through.
	slice := &discoveryv1.EndpointSlice{}
	require.NoError(t, c.Get(bg, client.ObjectKey{Namespace: ns, Name: "orders-abcde"}, slice))
	slice.Endpoints = functionSlice(ns, "orders", true).Endpoints
	require.NoError(t, c.Update(bg, slice))
	select {
	case r := <-held:
		assert.Equal(t, result{http.StatusOK, "hello from /hello", "true"}, r)
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was not released")
	}

	// Warm, routed by Host.
	req, _ := http.NewRequest(http.MethodGet, base+"/hi", nil)
	req.Host = "orders." + ns + ".svc.cluster.local"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello from /hi", string(b))
	assert.Equal(t, "false", resp.Header.Get(gateway.ColdStartHeader))

	// Never ready: 503 with Retry-After after the hold timeout.
	start := time.Now()
	resp, err = http.Get(base + "/" + ns + "/idle/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.GreaterOrEqual(t, time.Since(start), cfg.Gateway.HoldTimeout)

	// Slow-loris and garbage: closed by the header timeout, 400, nothing left behind.
	attack(t, cfg.GatewayListen, "GET /"+ns+"/orders/")()

	resp, err = http.Get("http://" + cfg.MetricsListen + "/metrics")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	fnLabels := func(name string) string { return `{function="` + name + `",namespace="` + ns + `"}` }
	assert.Contains(t, page, "kfn_gateway_cold_starts_total"+fnLabels("orders")+" 1", "per function")
	assert.Contains(t, page, "kfn_gateway_requests_total"+fnLabels("orders")+" 2")
	assert.Contains(t, page, "kfn_gateway_request_duration_seconds_count"+fnLabels("orders")+" 2")
	assert.Contains(t, page, "kfn_gateway_timeouts_total"+fnLabels("idle")+" 1")
	assert.NotContains(t, page, `function="nope"`, "an unknown function gets no series")
}

// TestWakeProbeInterval runs the gateway with the -wake-probe-interval it
// is given: a Function woken from zero is reached as soon as its host
// answers its ready path, before its EndpointSlice says it is ready (the
// default interval), and only once the slice says so with 0. The test API
// server runs no pods, so the Function's host is a stand-in that answers
// as kfn's hosts do (200 and its Function's name on the ready path); the
// slice lists it as not ready, as it stays until the kubelet's readiness
// probe.
func TestWakeProbeInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	cluster := testcluster.New(t, testcluster.WithScheme(v1alpha2.AddToScheme))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
	natsSrv := natstest.Start(t)
	bg := context.Background()

	for _, tc := range []struct {
		ns       string
		interval time.Duration
		want     int
	}{
		{"probed", eventbridge.DefaultConfig().WakeProbeInterval, http.StatusOK},
		{"unprobed", 0, http.StatusServiceUnavailable},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			var err error
			require.NoError(t, cluster.Client.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns}}))
			// On the machine's own address: the API server refuses a
			// loopback address in an EndpointSlice.
			host := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(endpoints.FunctionHeader, tc.ns+"/orders")
				fmt.Fprint(w, "loaded")
			}))
			host.Listener.Close()
			host.Listener, err = net.Listen("tcp", net.JoinHostPort(machineAddress(t), "0"))
			require.NoError(t, err)
			host.Start()
			defer host.Close()
			hostURL, err := url.Parse(host.URL)
			require.NoError(t, err)
			port, err := strconv.Atoi(hostURL.Port())
			require.NoError(t, err)
			slice := functionSlice(tc.ns, "orders", false)
			slice.Ports = []discoveryv1.EndpointPort{{Port: ptr.To(int32(port))}}
			slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{hostURL.Hostname()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}}
			require.NoError(t, cluster.Client.Create(bg, slice))

			cfg := eventbridge.DefaultProcess()
			cfg.NATSURL = natsSrv.URL()
			cfg.Components = []string{eventbridge.ComponentGateway}
			cfg.GatewayAuth, cfg.MetricsAuth = eventbridge.GatewayAuthNone, eventbridge.MetricsAuthNone
			cfg.GatewayListen, cfg.AdminListen, cfg.MetricsListen = testport.Addr(t), "", ""
			cfg.Gateway.HoldTimeout = 3 * time.Second
			cfg.LeaderElection = false
			cfg.Resolve = map[string]string{"orders." + tc.ns: host.URL}
			cfg.WakeProbeInterval = tc.interval
			ctx, cancel := context.WithCancel(bg)
			done := make(chan error, 1)
			go func() { done <- eventbridge.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
			defer func() {
				cancel()
				select {
				case err := <-done:
					assert.NoError(t, err, "a clean shutdown")
				case <-time.After(20 * time.Second):
					t.Error("the event bridge did not stop within 20s")
				}
			}()

			var resp *http.Response
			require.Eventually(t, func() bool {
				resp, err = http.Get("http://" + cfg.GatewayListen + "/" + tc.ns + "/orders/")
				return err == nil
			}, 30*time.Second, 20*time.Millisecond, "the gateway answers")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tc.want, resp.StatusCode, "interval %s: %s", tc.interval, body)
		})
	}
}

// machineAddress is an IPv4 address of this machine that is not loopback.
func machineAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no IPv4 address but loopback: the test needs one for an EndpointSlice")
	return ""
}
