package dispatcher_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metric returns the metric of that name with the given labels in b's
// registry, nil when absent. It runs in Eventually's goroutines: an error
// fails the test without stopping it (errorf) and reads as absent.
func (b *bridge) metric(name string, labels map[string]string) *dto.Metric {
	mfs, err := b.reg.Gather()
	if err != nil {
		b.errorf("gather metrics: %v", err)
		return nil
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return m
			}
		}
	}
	return nil
}

// gauge returns the value of a gauge (or counter), -1 when absent.
func (b *bridge) gauge(name string, labels map[string]string) float64 {
	switch m := b.metric(name, labels); {
	case m == nil:
		return -1
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	default:
		return m.GetGauge().GetValue()
	}
}

// histogramCount returns how many observations a histogram has, -1 when
// absent.
func (b *bridge) histogramCount(name string, labels map[string]string) int {
	m := b.metric(name, labels)
	if m == nil {
		return -1
	}
	return int(m.GetHistogram().GetSampleCount())
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// TestBacklogGauge: the backlog of a Subscription is read at scrape time
// from its consumer (pending plus unacknowledged), beside its budget and
// whether the dispatcher is ready.
func TestBacklogGauge(t *testing.T) {
	eps := newEndpoints(false)
	b := newBridge(t, withEndpoints(eps))
	b.reg.MustRegister(b.d.Collector())
	k := b.newSink("orders", nil)
	b.subscribe(sub("orders", "orders", config("maxBacklog", "50")))
	orders := map[string]string{"namespace": "default", "subscription": "orders"}
	require.Eventually(t, func() bool { return b.gauge("kfn_eventbridge_dispatcher_ready", nil) == 1 }, wait, tick)
	assert.Equal(t, 50.0, b.gauge("kfn_eventbridge_backlog_budget", orders))
	assert.Equal(t, 0.0, b.gauge("kfn_eventbridge_backlog", orders))

	for _, id := range []string{"1", "2", "3"} {
		b.publish("shop", "order.created.v1", id, "x")
	}
	require.Eventually(t, func() bool { return b.gauge("kfn_eventbridge_backlog", orders) == 3 }, wait, tick, "waiting while the sink is not ready")
	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 3 && b.gauge("kfn_eventbridge_backlog", orders) == 0 }, wait, tick)
	require.NoError(t, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_backlog_read_errors_total Scrapes whose listing of the consumers failed (the backlog is then missing from them).
# TYPE kfn_eventbridge_backlog_read_errors_total counter
kfn_eventbridge_backlog_read_errors_total 0
`), "kfn_eventbridge_backlog_read_errors_total"))

	b.d.Remove("default", "orders")
	assert.Equal(t, -1.0, b.gauge("kfn_eventbridge_backlog", orders), "a Subscription no longer served is not reported")
	assert.Equal(t, -1.0, b.gauge("kfn_eventbridge_backlog_budget", orders))

	// NATS gone: not ready, no backlog, and the scrape still answers.
	b.subscribe(sub("orders", "orders", config("maxBacklog", "50")))
	b.nats.Shutdown()
	require.Eventually(t, func() bool { return b.gauge("kfn_eventbridge_dispatcher_ready", nil) == 0 }, wait, tick)
	assert.Equal(t, -1.0, b.gauge("kfn_eventbridge_backlog", orders))
	assert.Equal(t, 50.0, b.gauge("kfn_eventbridge_backlog_budget", orders))
	assert.Positive(t, b.gauge("kfn_eventbridge_backlog_read_errors_total", nil), "counted as a failed read")
}

// TestLatencyHistograms: every attempt is timed, and every delivered event
// has its age recorded once.
func TestLatencyHistograms(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("orders", func(n int, _ *http.Request, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b.subscribe(sub("orders", "orders", config("backoffInitial", "10ms", "backoffMax", "10ms")))
	b.publish("shop", "order.created.v1", "1", "x")
	b.publish("shop", "order.created.v1", "2", "x")
	orders := map[string]string{"namespace": "default", "subscription": "orders"}
	require.Eventually(t, func() bool {
		return k.count() == 3 && b.histogramCount("kfn_eventbridge_event_age_seconds", orders) == 2
	}, wait, tick)
	assert.Equal(t, 3, b.histogramCount("kfn_eventbridge_delivery_duration_seconds", orders), "each attempt")
	assert.Equal(t, 2, b.histogramCount("kfn_eventbridge_event_age_seconds", orders), "each delivered event")
}
