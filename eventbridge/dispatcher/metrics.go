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

// counters are one Subscription's counters, looked up once per worker
// rather than once per event.
type counters struct {
	delivered, failed, deadLettered, discarded prometheus.Counter
	replies                                    map[string]prometheus.Counter
}

// noCounter counts nothing (for a nil *Metrics).
var noCounter = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})

func (m *Metrics) forSubscription(namespace, name string) *counters {
	if m == nil {
		return &counters{delivered: noCounter, failed: noCounter, deadLettered: noCounter, discarded: noCounter,
			replies: map[string]prometheus.Counter{"published": noCounter, "invalid": noCounter, "hop_limit": noCounter}}
	}
	c := &counters{
		delivered:    m.delivered.WithLabelValues(namespace, name),
		failed:       m.failed.WithLabelValues(namespace, name),
		deadLettered: m.deadLettered.WithLabelValues(namespace, name),
		discarded:    m.discarded.WithLabelValues(namespace, name),
		replies:      map[string]prometheus.Counter{},
	}
	for _, r := range []string{"published", "invalid", "hop_limit"} {
		c.replies[r] = m.replies.WithLabelValues(namespace, name, r)
	}
	return c
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
