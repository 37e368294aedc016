package activity

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the scaler core's Prometheus metrics; the zero value records
// nothing.
type metrics struct {
	refreshSeconds prometheus.Histogram
	refreshErrors  prometheus.Counter
	activations    *prometheus.CounterVec
	holds          *prometheus.CounterVec
	functions      prometheus.Gauge
	active         prometheus.Gauge
	watcherCount   prometheus.Gauge
	listenSubjects prometheus.Gauge
	pastBounds     prometheus.Gauge
}

// WithMetrics registers the scaler's metrics with reg: kfn_scaler_refresh_seconds,
// kfn_scaler_refresh_errors_total, kfn_scaler_activations_total{cause},
// kfn_scaler_activation_holds_total{ended_by},
// kfn_scaler_functions, kfn_scaler_functions_active, kfn_scaler_watchers,
// kfn_scaler_listen_subjects and kfn_scaler_functions_past_listen_bounds.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		m := &metrics{
			refreshSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "kfn_scaler_refresh_seconds",
				Help:    "Time to read the backlog of every consumer once.",
				Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
			}),
			refreshErrors: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "kfn_scaler_refresh_errors_total",
				Help: "Refreshes that could not read the backlog.",
			}),
			activations: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kfn_scaler_activations_total",
				Help: "Inactive->active transitions of Functions, by what found the work: event, request or backlog.",
			}, []string{"cause"}),
			holds: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kfn_scaler_activation_holds_total",
				Help: "Activations held from KEDA while a standby pod was claimed, by what ended the hold: claim_ended (the event bridge said so) or bound (the claim hold passed).",
			}, []string{"ended_by"}),
			functions: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "kfn_scaler_functions",
				Help: "Functions the scaler tracks.",
			}),
			active: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "kfn_scaler_functions_active",
				Help: "Functions active as of the last refresh.",
			}),
			watcherCount: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "kfn_scaler_watchers",
				Help: "Open activation watchers (StreamIsActive streams).",
			}),
			listenSubjects: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "kfn_scaler_listen_subjects",
				Help: "Subjects of the Functions within the bounds of listened subjects, as of the last refresh (listened on while they are inactive).",
			}),
			pastBounds: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "kfn_scaler_functions_past_listen_bounds",
				Help: "Functions not listened for because their namespace's or the scaler's bound of listened subjects is reached, as of the last refresh: the refresh wakes them.",
			}),
		}
		for _, c := range []prometheus.Collector{m.refreshSeconds, m.refreshErrors, m.activations, m.holds, m.functions, m.active, m.watcherCount, m.listenSubjects, m.pastBounds} {
			if err := reg.Register(c); err != nil {
				return fmt.Errorf("%w: register metrics: %w", ErrInvalidOption, err)
			}
		}
		for _, by := range []string{releasedByClaim, releasedByBound} {
			m.holds.WithLabelValues(by)
		}
		o.metrics = m
		return nil
	}
}

func (m *metrics) observeRefresh(d time.Duration, err error) {
	if m.refreshSeconds == nil {
		return
	}
	m.refreshSeconds.Observe(d.Seconds())
	if err != nil {
		m.refreshErrors.Inc()
	}
}

func (m *metrics) held(endedBy string) {
	if m.holds != nil {
		m.holds.WithLabelValues(endedBy).Inc()
	}
}

func (m *metrics) activation(cause string) {
	if m.activations != nil {
		m.activations.WithLabelValues(cause).Inc()
	}
}

func (m *metrics) setFunctions(total, active int) {
	setBoth(m.functions, m.active, total, active)
}

func (m *metrics) watchers(delta int) {
	if m.watcherCount != nil {
		m.watcherCount.Add(float64(delta))
	}
}

func (m *metrics) setListened(subjects, past int) {
	setBoth(m.listenSubjects, m.pastBounds, subjects, past)
}

// setBoth sets two gauges registered together (nil when the metrics are
// not registered) to a and b.
func setBoth(ga, gb prometheus.Gauge, a, b int) {
	if ga != nil {
		ga.Set(float64(a))
		gb.Set(float64(b))
	}
}
