package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// TestBacklogsFromTheEventBridgesMetrics: kfn get adds up a Function's
// backlog from its Subscriptions' backlog gauges, read from every event
// bridge pod's metrics: counters are summed over the pods, the gauge (the
// same consumer seen from each pod) is taken once.
func TestBacklogsFromTheEventBridgesMetrics(t *testing.T) {
	pages := []string{`# TYPE kfn_eventbridge_backlog gauge
kfn_eventbridge_backlog{namespace="shop",subscription="created"} 7
kfn_eventbridge_backlog{namespace="shop",subscription="paid"} 3
kfn_eventbridge_backlog{namespace="bank",subscription="opened"} 5
# TYPE kfn_eventbridge_delivered_total counter
kfn_eventbridge_delivered_total{namespace="shop",subscription="created"} 2
`, `# TYPE kfn_eventbridge_backlog gauge
kfn_eventbridge_backlog{namespace="shop",subscription="created"} 6
kfn_eventbridge_backlog{namespace="shop",subscription="paid"} 3
# TYPE kfn_eventbridge_delivered_total counter
kfn_eventbridge_delivered_total{namespace="shop",subscription="created"} 1
`}
	counts := map[types.NamespacedName]deliveries{}
	for _, page := range pages {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(page)) }))
		require.NoError(t, addDeliveries(context.Background(), srv.Client(), srv.URL, counts))
		srv.Close()
	}
	created := types.NamespacedName{Namespace: "shop", Name: "created"}
	assert.Equal(t, deliveries{delivered: 3, backlog: 7}, counts[created], "counters summed, the gauge taken once")

	sub := func(ns, name, sink string) eventingv1alpha2.Subscription {
		return eventingv1alpha2.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: eventingv1alpha2.SubscriptionSpec{Sink: sink, Source: "s", Types: []string{"t.v1"}}}
	}
	got := functionBacklogs([]eventingv1alpha2.Subscription{
		sub("shop", "created", "http://orders.shop.svc.cluster.local"),
		sub("shop", "paid", "http://orders.shop.svc.cluster.local/paid"),
		sub("bank", "opened", "http://ledger.bank.svc.cluster.local"),
		sub("bank", "elsewhere", "http://ledger.shop.svc.cluster.local"), // another namespace's sink: none
	}, counts)
	assert.Equal(t, map[types.NamespacedName]uint64{
		{Namespace: "shop", Name: "orders"}: 10,
		{Namespace: "bank", Name: "ledger"}: 5,
	}, got)
}
