package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// RequestDurationBuckets are the buckets of
// kfn_gateway_request_duration_seconds: a warm function answers in
// milliseconds, a cold start takes seconds, and a request is held at most
// the hold timeout (30 s by default) before the function's own time.
var RequestDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type metrics struct {
	requests, coldStarts, timeouts *prometheus.CounterVec
	inFlight                       *prometheus.GaugeVec
	duration                       *prometheus.HistogramVec
}

// newMetrics registers the gateway's metrics with reg (none when nil),
// each labelled with the function's namespace and name (function):
//
//	kfn_gateway_requests_total            requests proxied to a function
//	kfn_gateway_cold_starts_total         requests that waited for a ready backend
//	kfn_gateway_timeouts_total            requests answered 503 without a backend
//	kfn_gateway_in_flight                 requests in the gateway now
//	kfn_gateway_request_duration_seconds  histogram: proxied requests, arrival to the function's answer (holding included)
//
// Only functions that exist get a series: a request for an unknown one is
// refused before it is counted.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	labels := []string{"namespace", "function"}
	m := &metrics{
		requests:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_gateway_requests_total", Help: "Requests proxied to a function."}, labels),
		coldStarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_gateway_cold_starts_total", Help: "Requests that waited for a ready backend."}, labels),
		timeouts:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_gateway_timeouts_total", Help: "Requests answered 503 because no backend became ready."}, labels),
		inFlight:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kfn_gateway_in_flight", Help: "Requests in the gateway now, held ones included."}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kfn_gateway_request_duration_seconds",
			Help: "Requests proxied to a function, from arrival to the function's answer, time held for a cold start included.", Buckets: RequestDurationBuckets}, labels),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.coldStarts, m.timeouts, m.inFlight, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register gateway metrics: %w", err)
			}
		}
	}
	return m, nil
}

// function is one function's metrics, looked up once per request.
type function struct {
	requests, coldStarts, timeouts prometheus.Counter
	inFlight                       prometheus.Gauge
	duration                       prometheus.Observer
}

func (m *metrics) of(fn types.NamespacedName) function {
	return function{
		requests:   m.requests.WithLabelValues(fn.Namespace, fn.Name),
		coldStarts: m.coldStarts.WithLabelValues(fn.Namespace, fn.Name),
		timeouts:   m.timeouts.WithLabelValues(fn.Namespace, fn.Name),
		inFlight:   m.inFlight.WithLabelValues(fn.Namespace, fn.Name),
		duration:   m.duration.WithLabelValues(fn.Namespace, fn.Name),
	}
}
