package publisher

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the publisher's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	requests *prometheus.CounterVec
}

// NewMetrics registers the publisher's metrics with reg:
// kfn_eventbridge_publish_requests_total{endpoint,code}.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_publish_requests_total",
			Help: "Publish requests by endpoint (publish, v2, v1, subscribed) and HTTP status code.",
		}, []string{"endpoint", "code"}),
	}
	if err := reg.Register(m.requests); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) request(endpoint string, code int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
}
