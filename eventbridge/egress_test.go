package eventbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestDeliveriesStayWithTheirSink runs the event bridge in a cluster with
// sinks that try to send the shared bridge elsewhere with a tenant's
// events: a redirect to another server (in a cluster, another namespace,
// the bridge's own admin API), a redirect loop, and a Service that leads
// to the API server. Loopback is allowed here (the test's sinks listen
// there), so what stops each is the rule under test: nothing reaches the
// other server or the API server, each event is dead-lettered with the
// reason, and a redirect within the sink is followed.
func TestDeliveriesStayWithTheirSink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	var elsewhere atomic.Int32
	victim := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(victim.Close)
	var loops, moved atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			w.Header().Set("Location", victim.URL+"/deadletters/replay")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/loop":
			loops.Add(1)
			w.Header().Set("Location", "/loop")
			w.WriteHeader(http.StatusPermanentRedirect)
		case "/moved":
			w.Header().Set("Location", "/here")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/here":
			moved.Add(1)
		}
	}))
	t.Cleanup(sink.Close)

	cfg, cluster := runInCluster(t, func(cfg *eventbridge.Process, cluster *testcluster.Cluster) {
		cfg.Dispatcher.Egress.AllowLoopback = true
		// The API server as a pod sees it: its Service address from the
		// environment (here the address it listens on), and the endpoint
		// it publishes in default/kubernetes (here an address of its own,
		// 192.0.2.2, that nothing listens on). Plain HTTP: the dial is
		// what is refused.
		host, err := url.Parse(cluster.Config.Host)
		require.NoError(t, err)
		t.Setenv("KUBERNETES_SERVICE_HOST", host.Hostname())
		t.Setenv("KUBERNETES_SERVICE_PORT", host.Port())
		cfg.Resolve = map[string]string{"away.default": sink.URL + "/away", "loop.default": sink.URL + "/loop",
			"moved.default": sink.URL + "/moved", "api.default": "http://" + host.Host, "api-endpoint.default": "http://192.0.2.2:" + host.Port()}
	})
	c, bg := cluster.Client, context.Background()
	for _, name := range []string{"away", "loop", "moved", "api", "api-endpoint"} {
		require.NoError(t, c.Create(bg, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}))
		require.NoError(t, c.Create(bg, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}))
		require.NoError(t, c.Create(bg, &v1alpha2.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1alpha2.SubscriptionSpec{
				Sink: "http://" + name + ".default.svc.cluster.local", Source: name, Types: []string{"order.created.v1"},
				Config: map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxDeliver: "1"},
			},
		}))
	}
	for _, name := range []string{"away", "loop", "moved", "api", "api-endpoint"} {
		require.Eventually(t, func() bool {
			var s v1alpha2.Subscription
			return c.Get(bg, client.ObjectKey{Namespace: "default", Name: name}, &s) == nil && s.Status.Ready
		}, 30*time.Second, 20*time.Millisecond, "%s becomes ready", name)
		req, _ := http.NewRequest(http.MethodPost, "http://"+cfg.Listen+"/publish", strings.NewReader(`{}`))
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", name)
		req.Header.Set("Ce-Source", name)
		req.Header.Set("Ce-Type", "order.created.v1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}

	reasons := map[string]string{}
	require.Eventually(t, func() bool {
		resp, err := adminClient(t, cluster.Config).Get("https://" + cfg.AdminListen + "/deadletters")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var letters []deadletter.Letter
		if json.NewDecoder(resp.Body).Decode(&letters) != nil {
			return false
		}
		for _, l := range letters {
			reasons[l.Subscription] = fmt.Sprintf("%d %s", l.Status, l.Error)
		}
		return len(reasons) == 4
	}, 30*time.Second, 50*time.Millisecond, "four dead letters")
	assert.Contains(t, reasons["away"], "307")
	assert.Contains(t, reasons["away"], "not followed")
	assert.Contains(t, reasons["loop"], "308")
	assert.Contains(t, reasons["api"], "the Kubernetes API server's address")
	assert.Contains(t, reasons["api-endpoint"], "the Kubernetes API server's address")
	assert.Zero(t, elsewhere.Load(), "nothing reached the server the sink redirected to")
	assert.Equal(t, int32(4), loops.Load(), "a redirect loop is followed 3 times, then judged")
	assert.Equal(t, int32(1), moved.Load(), "a redirect within the sink is followed")
	assert.NotContains(t, reasons, "moved")
}

// TestGatewayStaysAwayFromTheAPIServer runs the event bridge's gateway in
// a cluster where a Function's backend is the API server (a tenant who
// may write EndpointSlices could name it): the request is answered 502
// with the reason, as a delivery there is refused, and never sent.
func TestGatewayStaysAwayFromTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	cfg, cluster := runInCluster(t, func(cfg *eventbridge.Process, cluster *testcluster.Cluster) {
		cfg.Components = []string{eventbridge.ComponentGateway}
		cfg.GatewayAuth = eventbridge.GatewayAuthNone
		cfg.GatewayListen, cfg.AdminListen = testport.Addr(t), ""
		cfg.Dispatcher.Egress.AllowLoopback = true // what stops it is the rule under test
		host, err := url.Parse(cluster.Config.Host)
		require.NoError(t, err)
		t.Setenv("KUBERNETES_SERVICE_HOST", host.Hostname())
		t.Setenv("KUBERNETES_SERVICE_PORT", host.Port())
		cfg.Resolve = map[string]string{"api.default": "http://" + host.Host}
	})
	require.NoError(t, cluster.Client.Create(context.Background(), functionSlice("default", "api", true)))
	var code int
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + cfg.GatewayListen + "/default/api/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		body, _ = io.ReadAll(resp.Body)
		return code != http.StatusNotFound && code != http.StatusServiceUnavailable
	}, 30*time.Second, 20*time.Millisecond, "the gateway knows the Function")
	assert.Equal(t, http.StatusBadGateway, code)
	assert.Contains(t, string(body), "the Kubernetes API server's address")
}
