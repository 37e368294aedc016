package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests, coldStarts, timeouts prometheus.Counter
	inFlight                       prometheus.Gauge
}

// newMetrics registers the gateway's metrics with reg (none when nil):
//
//	kfn_gateway_requests_total     requests proxied to a function
//	kfn_gateway_cold_starts_total  requests that waited for a ready backend
//	kfn_gateway_timeouts_total     requests answered 503 without a backend
//	kfn_gateway_in_flight          requests in the gateway now
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests:   prometheus.NewCounter(prometheus.CounterOpts{Name: "kfn_gateway_requests_total", Help: "Requests proxied to a function."}),
		coldStarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "kfn_gateway_cold_starts_total", Help: "Requests that waited for a ready backend."}),
		timeouts:   prometheus.NewCounter(prometheus.CounterOpts{Name: "kfn_gateway_timeouts_total", Help: "Requests answered 503 because no backend became ready."}),
		inFlight:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "kfn_gateway_in_flight", Help: "Requests in the gateway now, held ones included."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.coldStarts, m.timeouts, m.inFlight} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register gateway metrics: %w", err)
			}
		}
	}
	return m, nil
}
