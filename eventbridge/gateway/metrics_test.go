package gateway_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/gateway"
)

// forget makes key unknown, as a Function deleted.
func (b *backends) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.known, key)
	delete(b.ready, key)
}

// TestTheSeriesOfAGoneFunctionAreForgotten: a tenant creates a Function,
// calls it through the gateway, deletes it, and again with a new name, 20
// times: the gateway's series are those of the Functions that exist or
// were called since the last sweep, not of every name ever called (about
// 22 series each, kept for good before: the event bridge's memory and
// every scrape grew with a tenant's churn).
func TestTheSeriesOfAGoneFunctionAreForgotten(t *testing.T) {
	reg := prometheus.NewRegistry()
	bs := newBackends()
	be := newBackend(t)
	g, srv := newGatewayWith(t, bs, nil, gateway.Config{}, gateway.WithMetrics(reg))
	g.SetMetricsSweep(0) // at every request
	bs.set("team/stays", addr(be))
	for i := range 20 {
		key := fmt.Sprint("team/churn-", i)
		bs.set(key, addr(be))
		for _, path := range []string{"/" + key + "/", "/team/stays/"} {
			resp, err := http.Get(srv.URL + path)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
		bs.forget(key)
	}
	assert.Equal(t, 2, testutil.CollectAndCount(reg, "kfn_gateway_requests_total"),
		"the series of the Function that stays and of the last one called (forgotten at the next request)")
	assert.Equal(t, 2, testutil.CollectAndCount(reg, "kfn_gateway_request_duration_seconds"))
	assert.Equal(t, float64(20), requestsOf(t, reg, "team", "stays"), "a Function that stays keeps its counts")
}

// requestsOf is kfn_gateway_requests_total of namespace/name in reg.
func requestsOf(t *testing.T, reg *prometheus.Registry, namespace, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "kfn_gateway_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["function"] == name {
				return m.GetCounter().GetValue()
			}
		}
	}
	require.Failf(t, "no series", "%s/%s", namespace, name)
	return 0
}
