package depcache

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cache's Prometheus metrics. A nil *metrics records
// nothing.
type metrics struct {
	requests    *prometheus.CounterVec
	storedBytes prometheus.Counter
	stored      prometheus.Counter
	uploads     prometheus.Gauge
	downloads   prometheus.Gauge
}

// statusTimeout bounds the look at the bucket a scrape makes.
const statusTimeout = 2 * time.Second

// newMetrics registers the cache's metrics with reg:
//
//	kfn_eventbridge_dependency_cache_requests_total{route,code}  every request (route get, head, put)
//	kfn_eventbridge_dependency_cache_stored_bytes_total          bytes of the objects this server stored
//	kfn_eventbridge_dependency_cache_stored_objects_total        objects this server stored
//	kfn_eventbridge_dependency_cache_uploads                     uploads under way on this server
//	kfn_eventbridge_dependency_cache_downloads                   downloads (GET) under way on this server
//	kfn_eventbridge_dependency_cache_bucket_bytes                bytes the bucket holds (every server's objects), read at each scrape
//
// No metric names a namespace: the cache's logs do.
func newMetrics(reg prometheus.Registerer, c *Cache) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_dependency_cache_requests_total",
			Help: "Dependency cache requests by route (get, head, put) and HTTP status code.",
		}, []string{"route", "code"}),
		storedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kfn_eventbridge_dependency_cache_stored_bytes_total",
			Help: "Bytes of the dependency objects this event bridge stored.",
		}),
		stored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kfn_eventbridge_dependency_cache_stored_objects_total",
			Help: "Dependency objects this event bridge stored.",
		}),
		uploads: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kfn_eventbridge_dependency_cache_uploads",
			Help: "Dependency uploads under way on this event bridge.",
		}),
		downloads: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kfn_eventbridge_dependency_cache_downloads",
			Help: "Dependency downloads (GET) under way on this event bridge.",
		}),
	}
	bucket := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kfn_eventbridge_dependency_cache_bucket_bytes",
		Help: "Bytes the dependency bucket holds, every event bridge's objects (-1 when it cannot be read).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
		defer cancel()
		return float64(c.bucketBytes(ctx))
	})
	for _, col := range []prometheus.Collector{m.requests, m.storedBytes, m.stored, m.uploads, m.downloads, bucket} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// request counts a request of route answered with code.
func (m *metrics) request(route string, code int) {
	if m != nil {
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	}
}

// storedObject counts an object of size bytes stored.
func (m *metrics) storedObject(size uint64) {
	if m != nil {
		m.stored.Inc()
		m.storedBytes.Add(float64(size))
	}
}

// upload adds d to the uploads under way.
func (m *metrics) upload(d float64) {
	if m != nil {
		m.uploads.Add(d)
	}
}

// download adds d to the downloads under way.
func (m *metrics) download(d float64) {
	if m != nil {
		m.downloads.Add(d)
	}
}
