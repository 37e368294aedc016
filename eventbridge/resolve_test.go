package eventbridge_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// readyPods is a watcher that knows Service default/fn with ready pods.
func readyPods(ips ...string) *endpoints.Watcher {
	w, err := endpoints.New()
	if err != nil {
		panic(err) // New without options never fails
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fn-x", Labels: map[string]string{discoveryv1.LabelServiceName: "fn"}},
		Ports:      []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	w.OnAdd(s, true)
	w.MarkSynced()
	return w
}

func sinkTo(t *testing.T, raw string) v1alpha2.Sink {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return v1alpha2.Sink{URL: u, Namespace: "default", Service: "fn"}
}

func TestClusterResolverDeliversToThePodsInTurn(t *testing.T) {
	r := eventbridge.ClusterResolver(readyPods("10.0.0.1", "10.0.0.2"), nil)
	seen := map[string]bool{}
	for range 4 {
		got, err := r.Resolve(sinkTo(t, "http://fn.default.svc.cluster.local/orders?x=1"))
		require.NoError(t, err)
		seen[got] = true
	}
	assert.Equal(t, map[string]bool{"http://10.0.0.1:8080/orders?x=1": true, "http://10.0.0.2:8080/orders?x=1": true}, seen,
		"each delivery to the next pod, path and query kept")
}

func TestClusterResolverFallsBack(t *testing.T) {
	tests := map[string]struct {
		eps    *endpoints.Watcher
		static map[string]string
		sink   string
		want   string
	}{
		"no ready pod": {eps: readyPods(), sink: "http://fn.default.svc.cluster.local/", want: "http://fn.default.svc.cluster.local/"},
		"https sink":   {eps: readyPods("10.0.0.1"), sink: "https://fn.default.svc.cluster.local/", want: "https://fn.default.svc.cluster.local/"},
		"no watcher":   {sink: "http://fn.default.svc.cluster.local/a", want: "http://fn.default.svc.cluster.local/a"},
		"static wins": {eps: readyPods("10.0.0.1"), static: map[string]string{"fn.default": "http://127.0.0.1:9000"},
			sink: "http://fn.default.svc.cluster.local/a", want: "http://127.0.0.1:9000/a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := eventbridge.ClusterResolver(tc.eps, tc.static).Resolve(sinkTo(t, tc.sink))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestClusterBackendsPickAReadyPod(t *testing.T) {
	b := eventbridge.ClusterBackends{Endpoints: readyPods("10.0.0.1")}
	got, err := b.Pick("default", "fn")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:8080", got)
	b = eventbridge.ClusterBackends{Endpoints: readyPods()}
	got, err = b.Pick("default", "fn")
	require.NoError(t, err)
	assert.Equal(t, "fn.default.svc.cluster.local:80", got, "through the Service when no pod can be named")
}

// TestClusterBackendsReachAServiceByItsEndpointSlices: an APIRule's
// Service that is not a Function's is read from a real API server, its
// port found by number and reached at the ready endpoints of the port of
// that name in its own namespace's EndpointSlices (fed by hand: envtest
// runs no EndpointSlice controller); a Service, or a port of it, that
// does not exist, and an ExternalName Service, wrap
// gateway.ErrNoService; a Service of another namespace with the same
// name has its own endpoints (here none), never these.
func TestClusterBackendsReachAServiceByItsEndpointSlices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	cluster := testcluster.New(t)
	c, bg := cluster.Client, context.Background()
	require.NoError(t, c.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}))
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fn"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "fn"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "elsewhere"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "bank.team-c.svc.cluster.local"}},
	} {
		require.NoError(t, c.Create(bg, s))
	}
	b := eventbridge.ClusterBackends{Endpoints: readyPods("10.0.0.1"), Services: c}

	addr, err := b.ServiceAddr(bg, "default", "fn", 80)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:8080", addr, "port 80 is named http, which the slice serves at 8080")
	for name, tc := range map[string]struct {
		namespace, service string
		port               int32
		want               string
	}{
		"no such port":        {"default", "fn", 8080, "no such Service: the Service has no port 8080"},
		"no such Service":     {"default", "gone", 80, "no such Service"},
		"an ExternalName":     {"default", "elsewhere", 80, "no such Service: an ExternalName Service has no endpoints of its own"},
		"another namespace's": {"team-b", "fn", 80, "no ready endpoint"},
	} {
		_, err := b.ServiceAddr(bg, tc.namespace, tc.service, tc.port)
		require.Error(t, err, name)
		assert.Equal(t, tc.want, err.Error(), name)
		assert.Equal(t, tc.want != "no ready endpoint", errors.Is(err, gateway.ErrNoService), name)
	}
	_, err = eventbridge.ClusterBackends{Endpoints: readyPods("10.0.0.1")}.ServiceAddr(bg, "default", "fn", 80)
	assert.ErrorIs(t, err, gateway.ErrNoService, "without a Service reader, Functions only")
}
