package subscription

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are what the Reconciler and a Set count. A nil *Metrics counts
// nothing.
type Metrics struct {
	lost *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_consumers_lost_total",
			Help: "Consumers of Subscriptions that NATS lost (with their stream, or alone) together with the events waiting in them, and that were made anew, by Subscription.",
		}, []string{"namespace", "subscription"}),
	}
	if err := reg.Register(m.lost); err != nil {
		return nil, err
	}
	return m, nil
}

// consumerLost counts a lost consumer.
func (m *Metrics) consumerLost(namespace, name string) {
	if m != nil {
		m.lost.WithLabelValues(namespace, name).Inc()
	}
}
