package gateway

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// metricsSweep is how often, at most, the gateway forgets the series of
// the functions that are gone (sweep).
const metricsSweep = time.Minute

// RequestDurationBuckets are the buckets of
// kfn_gateway_request_duration_seconds: a warm function answers in
// milliseconds, a cold start takes seconds, and a request is held at most
// the hold timeout (30 s by default) before the function's own time.
var RequestDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type metrics struct {
	requests, coldStarts, timeouts *prometheus.CounterVec
	inFlight                       *prometheus.GaugeVec
	duration                       *prometheus.HistogramVec

	mu sync.Mutex
	// series are the functions that have series; swept is when the gone
	// ones were last forgotten, every how often (metricsSweep but in
	// tests).
	series map[types.NamespacedName]struct{}
	swept  time.Time
	every  time.Duration
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
// refused before it is counted, and the series of a function gone are
// forgotten (sweep), so that a tenant calling ever new Functions, each
// deleted after its call, does not grow them without bound.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	labels := []string{"namespace", "function"}
	m := &metrics{
		requests:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_gateway_requests_total", Help: "Requests proxied to a function."}, labels),
		coldStarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_gateway_cold_starts_total", Help: "Requests that waited for a ready backend."}, labels),
		timeouts:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kfn_gateway_timeouts_total", Help: "Requests answered 503 because no backend became ready."}, labels),
		inFlight:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kfn_gateway_in_flight", Help: "Requests in the gateway now, held ones included."}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kfn_gateway_request_duration_seconds",
			Help: "Requests proxied to a function, from arrival to the function's answer, time held for a cold start included.", Buckets: RequestDurationBuckets}, labels),
		series: map[types.NamespacedName]struct{}{}, every: metricsSweep,
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

// of returns fn's series, made when it has none.
func (m *metrics) of(fn types.NamespacedName) function {
	m.mu.Lock()
	m.series[fn] = struct{}{}
	m.mu.Unlock()
	return function{
		requests:   m.requests.WithLabelValues(fn.Namespace, fn.Name),
		coldStarts: m.coldStarts.WithLabelValues(fn.Namespace, fn.Name),
		timeouts:   m.timeouts.WithLabelValues(fn.Namespace, fn.Name),
		inFlight:   m.inFlight.WithLabelValues(fn.Namespace, fn.Name),
		duration:   m.duration.WithLabelValues(fn.Namespace, fn.Name),
	}
}

// sweep forgets the series of the functions gone (known says which are
// not) that have no request in flight (busy says which have), at most once
// per metricsSweep (a look at every function with series): a request in flight keeps its function's series, and
// one that comes again makes them anew. It returns how many functions'
// series it forgot.
func (m *metrics) sweep(now time.Time, known, busy func(types.NamespacedName) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.swept) < m.every {
		return 0
	}
	m.swept = now
	gone := 0
	for fn := range m.series {
		if known(fn) || busy(fn) {
			continue
		}
		labels := prometheus.Labels{"namespace": fn.Namespace, "function": fn.Name}
		m.requests.DeletePartialMatch(labels)
		m.coldStarts.DeletePartialMatch(labels)
		m.timeouts.DeletePartialMatch(labels)
		m.inFlight.DeletePartialMatch(labels)
		m.duration.DeletePartialMatch(labels)
		delete(m.series, fn)
		gone++
	}
	return gone
}

// seriesOf returns fn's series, forgetting first, at most once per
// metricsSweep, those of the functions gone and not in flight.
func (g *Gateway) seriesOf(fn types.NamespacedName, now time.Time) function {
	g.metrics.sweep(now, func(f types.NamespacedName) bool { return g.backends.Known(f.Namespace, f.Name) }, g.busy)
	return g.metrics.of(fn)
}
