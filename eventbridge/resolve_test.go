package eventbridge_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
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
