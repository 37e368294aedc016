package dispatcher

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's per-Subscription Prometheus counters. A nil
// *Metrics records nothing.
type Metrics struct {
	delivered    *prometheus.CounterVec
	failed       *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	discarded    *prometheus.CounterVec
	replies      *prometheus.CounterVec
}

// NewMetrics registers, with reg, counters labelled by namespace and
// subscription:
//
//	kfn_eventbridge_delivered_total          events the sink acknowledged (2xx)
//	kfn_eventbridge_delivery_failures_total  failed delivery attempts
//	kfn_eventbridge_dead_lettered_total      events moved to the dead-letter stream
//	kfn_eventbridge_discarded_total          events dropped after the last attempt (deadLetter: "false")
//	kfn_eventbridge_replies_total{result}    sink replies: published, invalid, hop_limit
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"namespace", "subscription"}
	m := &Metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_delivered_total", Help: "Events delivered to the sink (2xx).",
		}, labels),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_delivery_failures_total", Help: "Failed delivery attempts.",
		}, labels),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_dead_lettered_total", Help: "Events moved to the dead-letter stream.",
		}, labels),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_discarded_total", Help: "Events dropped after their last attempt because dead-lettering is off.",
		}, labels),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_replies_total", Help: "CloudEvent replies of sinks by result: published, invalid, hop_limit.",
		}, append(labels, "result")),
	}
	for _, c := range []prometheus.Collector{m.delivered, m.failed, m.deadLettered, m.discarded, m.replies} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type counter int

const (
	counterDelivered counter = iota
	counterFailed
	counterDeadLettered
	counterDiscarded
	counterReplies
)

func (m *Metrics) inc(c counter, labelValues ...string) {
	if m == nil {
		return
	}
	[]*prometheus.CounterVec{m.delivered, m.failed, m.deadLettered, m.discarded, m.replies}[c].WithLabelValues(labelValues...).Inc()
}

func (m *Metrics) forget(namespace, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": namespace, "subscription": name}
	for _, c := range []*prometheus.CounterVec{m.delivered, m.failed, m.deadLettered, m.discarded, m.replies} {
		c.DeletePartialMatch(l)
	}
}
