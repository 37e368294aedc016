package observe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's per-Subscription Prometheus metrics. A nil
// *Metrics records nothing.
type Metrics struct {
	delivered        *prometheus.CounterVec
	failed           *prometheus.CounterVec
	deadLettered     *prometheus.CounterVec
	deadLetterFull   *prometheus.CounterVec
	discarded        *prometheus.CounterVec
	replies          *prometheus.CounterVec
	deliveryDuration *prometheus.HistogramVec
	eventAge         *prometheus.HistogramVec
}

// Buckets of the histograms, in seconds. A delivery is a request to a
// function nearby: from a millisecond to the default request timeout of a
// minute. An event's age spans from the sub-millisecond of a healthy
// pipeline to the hour of a long retry schedule or a sink that was down.
var (
	DeliveryDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	EventAgeBuckets         = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
)

// NewMetrics registers, with reg, metrics labelled by namespace and
// subscription:
//
//	kfn_eventbridge_delivered_total            events the sink acknowledged (2xx)
//	kfn_eventbridge_delivery_failures_total    failed delivery attempts
//	kfn_eventbridge_dead_lettered_total        events moved to the dead-letter stream
//	kfn_eventbridge_dead_letters_refused_total dead letters that could not be stored (no room, too large): the event is dropped
//	kfn_eventbridge_discarded_total            events dropped after the last attempt (deadLetter: "false")
//	kfn_eventbridge_replies_total{result}      sink replies: published, invalid, hop_limit, rate_limited
//	kfn_eventbridge_delivery_duration_seconds  histogram: each attempt, request to answer
//	kfn_eventbridge_event_age_seconds          histogram: each delivered event, stored to the start of the attempt that delivered it
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
		deadLetterFull: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_dead_letters_refused_total", Help: "Dead letters that could not be stored: larger than the namespace's dead-letter bytes, or the dead-letter stream full and the namespace without an older letter of its own to drop for it (no namespace's letters are dropped for another's). The event is dropped and logged, not kept in the event stream.",
		}, labels),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_discarded_total", Help: "Events dropped after their last attempt because dead-lettering is off.",
		}, labels),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_replies_total", Help: "CloudEvent replies of sinks by result: published, invalid, hop_limit, rate_limited.",
		}, append(labels, "result")),
		deliveryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kfn_eventbridge_delivery_duration_seconds", Help: "Delivery attempts, from the request to the sink to its answer (or failure).",
			Buckets: DeliveryDurationBuckets,
		}, labels),
		eventAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kfn_eventbridge_event_age_seconds", Help: "Age of delivered events: from being stored to the start of the attempt that delivered them (time in the stream, retries and backoff included).",
			Buckets: EventAgeBuckets,
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.delivered, m.failed, m.deadLettered, m.deadLetterFull, m.discarded, m.replies, m.deliveryDuration, m.eventAge} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Counters are one Subscription's metrics, looked up once per worker
// rather than once per event. Replies are by result: published, invalid,
// hop_limit, rate_limited.
type Counters struct {
	Delivered, Failed, DeadLettered, DeadLetterFull, Discarded prometheus.Counter
	Replies                                                    map[string]prometheus.Counter
	DeliveryDuration, EventAge                                 prometheus.Observer
}

// Nothing, for a nil *metrics: a counter and a histogram never registered.
var (
	noCounter   = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	noHistogram = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "unregistered"})
)

// ForSubscription returns the Subscription's metrics; of a nil *Metrics,
// counters registered nowhere.
func (m *Metrics) ForSubscription(namespace, name string) *Counters {
	if m == nil {
		return &Counters{Delivered: noCounter, Failed: noCounter, DeadLettered: noCounter, DeadLetterFull: noCounter, Discarded: noCounter,
			Replies:          map[string]prometheus.Counter{"published": noCounter, "invalid": noCounter, "hop_limit": noCounter, "rate_limited": noCounter},
			DeliveryDuration: noHistogram, EventAge: noHistogram}
	}
	c := &Counters{
		Delivered:        m.delivered.WithLabelValues(namespace, name),
		Failed:           m.failed.WithLabelValues(namespace, name),
		DeadLettered:     m.deadLettered.WithLabelValues(namespace, name),
		DeadLetterFull:   m.deadLetterFull.WithLabelValues(namespace, name),
		Discarded:        m.discarded.WithLabelValues(namespace, name),
		Replies:          map[string]prometheus.Counter{},
		DeliveryDuration: m.deliveryDuration.WithLabelValues(namespace, name),
		EventAge:         m.eventAge.WithLabelValues(namespace, name),
	}
	for _, r := range []string{"published", "invalid", "hop_limit", "rate_limited"} {
		c.Replies[r] = m.replies.WithLabelValues(namespace, name, r)
	}
	return c
}

// Forget deletes the Subscription's metrics.
func (m *Metrics) Forget(namespace, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": namespace, "subscription": name}
	for _, c := range []*prometheus.CounterVec{m.delivered, m.failed, m.deadLettered, m.deadLetterFull, m.discarded, m.replies} {
		c.DeletePartialMatch(l)
	}
	for _, h := range []*prometheus.HistogramVec{m.deliveryDuration, m.eventAge} {
		h.DeletePartialMatch(l)
	}
}
