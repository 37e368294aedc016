package publisher

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/internal/seats"
)

// metrics are the publisher's Prometheus metrics. A nil *metrics records
// nothing.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// PublishDurationBuckets are the buckets of
// kfn_eventbridge_publish_duration_seconds: from the fraction of a
// millisecond JetStream takes to store an event to the 10 s store timeout.
var PublishDurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newMetrics registers the publisher's metrics with reg:
//
//	kfn_eventbridge_publish_requests_total{endpoint,code}      every publish request
//	kfn_eventbridge_publish_duration_seconds{endpoint}         histogram: requests whose events were stored (2xx), received to answered
//	kfn_eventbridge_publish_in_progress                        gauge: requests worked on now (Config.MaxPublishing)
//
// The endpoint is publish, v2, v1 or subscribed. Publishing happens before
// an event is matched with Subscriptions, so these have no Subscription
// label; the dispatcher's metrics do.
func newMetrics(reg prometheus.Registerer, publishing *publishing, turns *seats.Gate) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_publish_requests_total",
			Help: "Publish requests by endpoint (publish, v2, v1, subscribed) and HTTP status code.",
		}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kfn_eventbridge_publish_duration_seconds",
			Help:    "Publish requests whose events were stored (2xx), from receiving the request to answering it, by endpoint.",
			Buckets: PublishDurationBuckets,
		}, []string{"endpoint"}),
	}
	all := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kfn_eventbridge_publish_in_progress",
		Help: "Publish requests the publisher works on now, from knowing their sender to answering them (past -max-publishing, shared among sender namespaces).",
	}, func() float64 { return float64(publishing.inProgress()) })
	inProgress := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kfn_eventbridge_publish_namespaced_in_progress",
		Help: "Publish requests of senders with a namespace being decoded, checked and stored now (each namespace's at most -publishing-per-namespace).",
	}, func() float64 { h, _ := turns.Totals(); return float64(h) })
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kfn_eventbridge_publish_namespaced_waiting",
		Help: "Read publish requests of senders with a namespace waiting now for their turn among their namespace's (-publishing-per-namespace).",
	}, func() float64 { _, w := turns.Totals(); return float64(w) })
	for _, c := range []prometheus.Collector{m.requests, m.duration, all, inProgress, waiting} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// request counts a request answered with code.
func (m *metrics) request(endpoint string, code int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
}

// endpointMetrics are one endpoint's metrics, looked up once: its
// duration histogram, and its request counter of each status code the
// first time the endpoint answers it (rather than hashing the labels and
// formatting the code on every request).
type endpointMetrics struct {
	m        *metrics
	endpoint string
	duration prometheus.Observer
	codes    *codeCounters
}

// codeCounters are an endpoint's request counters by status code.
type codeCounters struct {
	mu      sync.RWMutex
	counter map[int]prometheus.Counter
}

// forEndpoint returns the endpoint's metrics; they record nothing for a
// nil *metrics.
func (m *metrics) forEndpoint(endpoint string) endpointMetrics {
	if m == nil {
		return endpointMetrics{}
	}
	return endpointMetrics{m: m, endpoint: endpoint, duration: m.duration.WithLabelValues(endpoint),
		codes: &codeCounters{counter: map[int]prometheus.Counter{}}}
}

// requests is the endpoint's counter of requests answered with code.
func (e endpointMetrics) requests(code int) prometheus.Counter {
	e.codes.mu.RLock()
	c, ok := e.codes.counter[code]
	e.codes.mu.RUnlock()
	if ok {
		return c
	}
	c = e.m.requests.WithLabelValues(e.endpoint, strconv.Itoa(code))
	e.codes.mu.Lock()
	e.codes.counter[code] = c
	e.codes.mu.Unlock()
	return c
}

// published counts a publish request answered with code, and times it
// when its events were stored.
func (e endpointMetrics) published(code int, took time.Duration) {
	if e.m == nil {
		return
	}
	e.requests(code).Inc()
	if code >= 200 && code < 300 {
		e.duration.Observe(took.Seconds())
	}
}
