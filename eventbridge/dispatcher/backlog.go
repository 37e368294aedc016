package dispatcher

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher/schedule"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// backlogReadTimeout bounds the consumer listing of one scrape.
const backlogReadTimeout = 5 * time.Second

// Collector returns a Prometheus collector that reads, at scrape time, the
// state of the Subscriptions the dispatcher serves:
//
//	kfn_eventbridge_backlog{namespace,subscription}         events waiting: the consumer's pending plus unacknowledged events
//	kfn_eventbridge_backlog_budget{namespace,subscription}  the Subscription's maxBacklog, held to its namespace's total
//	kfn_eventbridge_dispatcher_ready                        1 while the dispatcher runs and is connected to NATS, else 0
//	kfn_eventbridge_backlog_read_errors_total               scrapes that could not list the consumers
//
// One scrape costs one listing of the consumers of each of the event
// stream's partitions (one JetStream API request per 256 consumers),
// however many Subscriptions
// there are; nothing is read per event. Every dispatcher replica reports
// the same backlog: aggregate with max by (namespace, subscription).
func (d *Dispatcher) Collector() prometheus.Collector {
	return &backlogCollector{
		d: d, backlogs: jsstream.NewBacklogs(d.js, d.cfg.Streams),
		backlog: prometheus.NewDesc("kfn_eventbridge_backlog",
			"Events waiting for the Subscription: its consumer's pending plus unacknowledged events, read at scrape time.",
			[]string{"namespace", "subscription"}, nil),
		budget: prometheus.NewDesc("kfn_eventbridge_backlog_budget",
			"The Subscription's maxBacklog, held to its namespace's total: past it the oldest waiting events of a failing sink are dead-lettered.",
			[]string{"namespace", "subscription"}, nil),
		ready: prometheus.NewDesc("kfn_eventbridge_dispatcher_ready",
			"1 while this dispatcher runs and is connected to NATS, else 0.", nil, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kfn_eventbridge_backlog_read_errors_total",
			Help: "Scrapes whose listing of the consumers failed (the backlog is then missing from them).",
		}),
	}
}

type backlogCollector struct {
	d                      *Dispatcher
	backlog, budget, ready *prometheus.Desc
	errors                 prometheus.Counter
	backlogs               *jsstream.Backlogs
}

var _ prometheus.Collector = (*backlogCollector)(nil)

// Describe implements prometheus.Collector.
func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.budget
	ch <- c.ready
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	started, served := d.sched.Served()
	connected := d.js.Conn().IsConnected()
	ready := 0.0
	if started && connected {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready)
	for _, t := range served {
		ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(t.MaxBacklog), t.Namespace, t.Name)
	}
	switch {
	case len(served) == 0:
	case !connected:
		c.errors.Inc() // asking now would hold the scrape until the timeout
	default:
		if err := c.collectBacklog(ch, served); err != nil {
			c.errors.Inc()
			d.log.Warn("reading the backlog for metrics failed", "error", err)
		}
	}
	c.errors.Collect(ch)
}

// collectBacklog lists the consumers of the event stream's partitions once
// and reports the backlog of those of served Subscriptions, summed over
// the partitions.
func (c *backlogCollector) collectBacklog(ch chan<- prometheus.Metric, served map[string]schedule.Served) error {
	ctx, cancel := context.WithTimeout(context.Background(), backlogReadTimeout)
	defer cancel()
	backlogs, err := c.backlogs.Read(ctx)
	if err != nil {
		return err
	}
	for name, n := range backlogs {
		if t, ok := served[name]; ok {
			ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n), t.Namespace, t.Name)
		}
	}
	return nil
}
