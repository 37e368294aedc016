package subscription

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are what the Reconciler counts. A nil *metrics counts nothing.
type metrics struct {
	lost *prometheus.CounterVec
}

// newMetrics registers the metrics with reg.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_consumers_lost_total",
			Help: "Consumers of Subscriptions that NATS lost (with their stream, or alone) together with the events waiting in them, and that were made anew, by Subscription.",
		}, []string{"namespace", "subscription"}),
	}
	if err := reg.Register(m.lost); err != nil {
		return nil, fmt.Errorf("register subscription metrics: %w", err)
	}
	return m, nil
}

// consumerLost counts a lost consumer.
func (m *metrics) consumerLost(namespace, name string) {
	if m != nil {
		m.lost.WithLabelValues(namespace, name).Inc()
	}
}
