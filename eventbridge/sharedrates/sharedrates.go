package sharedrates

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/eventbridge/admission"
)

// DefaultSubject is the core NATS subject of the reports.
const DefaultSubject = "kfn.eventbridge.spent"

// DefaultInterval is how often a replica reports what was taken: the
// longest another replica may admit a namespace's events without knowing.
const DefaultInterval = 100 * time.Millisecond

// Bounds of a Report, each well above what a replica can take in an
// interval: a report past them is dropped.
const (
	// MaxSpentPerReport is the most namespaces one report holds; a
	// replica with more to tell sends several.
	MaxSpentPerReport = 1024
	// maxReplicaBytes bounds a report's replica name.
	maxReplicaBytes = 64
	// maxEvents and maxBytes bound one namespace's counts in a report.
	maxEvents = 1 << 30
	maxBytes  = 1 << 40
)

// ErrInvalidOption is wrapped by New's errors about a missing dependency
// or a bad option.
var ErrInvalidOption = errors.New("invalid shared rates option")

// errInvalidReport is wrapped by Decode's errors.
var errInvalidReport = errors.New("invalid report")

// Report is what one replica took of each namespace's rates in an
// interval, as it goes on the subject (JSON).
type Report struct {
	// Replica names the reporting replica (random per process): a
	// replica skips its own reports.
	Replica string            `json:"replica"`
	Spent   []admission.Spent `json:"spent"`
}

// Decode parses and checks a report: a replica name, at most
// MaxSpentPerReport namespaces, each a namespace name (or "" for the
// publishers without one) with counts that are not negative and within
// what a replica can take.
func Decode(data []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return Report{}, fmt.Errorf("%w: %w", errInvalidReport, err)
	}
	switch {
	case r.Replica == "" || len(r.Replica) > maxReplicaBytes:
		return Report{}, fmt.Errorf("%w: a replica name of 1 to %d bytes is required", errInvalidReport, maxReplicaBytes)
	case len(r.Spent) > MaxSpentPerReport:
		return Report{}, fmt.Errorf("%w: %d namespaces, more than %d", errInvalidReport, len(r.Spent), MaxSpentPerReport)
	}
	for _, s := range r.Spent {
		if s.Namespace != "" {
			if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
				return Report{}, fmt.Errorf("%w: namespace %.70q: %s", errInvalidReport, s.Namespace, errs[0])
			}
		}
		if s.Events < 0 || s.Events > maxEvents || s.Bytes < 0 || s.Bytes > maxBytes {
			return Report{}, fmt.Errorf("%w: namespace %q: %d events and %d bytes are not counts a replica takes", errInvalidReport, s.Namespace, s.Events, s.Bytes)
		}
	}
	return r, nil
}

// Option sets an optional setting of a Sharer.
type Option func(*Sharer) error

// WithSubject sets the reports' subject (DefaultSubject without it); an
// empty one is refused.
func WithSubject(subject string) Option {
	return func(s *Sharer) error {
		if subject == "" {
			return fmt.Errorf("%w: empty subject", ErrInvalidOption)
		}
		s.subject = subject
		return nil
	}
}

// WithInterval sets how often what was taken is reported
// (DefaultInterval without it); it must be positive.
func WithInterval(d time.Duration) Option {
	return func(s *Sharer) error {
		if d <= 0 {
			return fmt.Errorf("%w: the interval must be positive, not %s", ErrInvalidOption, d)
		}
		s.interval = d
		return nil
	}
}

// WithLogger sets the logger of the reports not sent or dropped; the
// default discards.
func WithLogger(l *slog.Logger) Option {
	return func(s *Sharer) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		s.log = l
		return nil
	}
}

// WithMetrics registers the reports' counter with reg
// (kfn_eventbridge_rate_reports_total, by result: sent, unsent, applied,
// dropped, own); a nil reg registers nothing.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(s *Sharer) error {
		if reg == nil {
			return nil
		}
		if err := reg.Register(s.reports); err != nil {
			return fmt.Errorf("register rate reports metric: %w", err)
		}
		return nil
	}
}

// Results of the reports' counter.
const (
	ResultSent    = "sent"
	ResultUnsent  = "unsent"
	ResultApplied = "applied"
	ResultDropped = "dropped"
	ResultOwn     = "own"
)

// Sharer shares one replica's Rates with the others on a subject.
type Sharer struct {
	nc       *nats.Conn
	rates    *admission.Rates
	replica  string
	subject  string
	interval time.Duration
	log      *slog.Logger
	reports  *prometheus.CounterVec
	sub      *nats.Subscription
}

// Reports counts the reports by result (ResultSent and so on): the
// sharer's metric, whether registered or not.
func (s *Sharer) Reports() *prometheus.CounterVec { return s.reports }

// New returns a Sharer of rates over nc, subscribed to the others'
// reports (which it takes from rates from then on), and makes rates record
// what they take (admission.Rates.RecordSpent): call it before rates are
// used, and Run. Its errors wrap ErrInvalidOption, or are those of
// subscribing.
func New(nc *nats.Conn, rates *admission.Rates, opts ...Option) (*Sharer, error) {
	if nc == nil || rates == nil {
		return nil, fmt.Errorf("%w: nil NATS connection or rates", ErrInvalidOption)
	}
	s := &Sharer{nc: nc, rates: rates, replica: rand.Text(), subject: DefaultSubject, interval: DefaultInterval, log: slog.New(slog.DiscardHandler),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kfn_eventbridge_rate_reports_total",
			Help: "Reports of what each namespace took of its rates, which the event bridge replicas tell each other, by result: sent, unsent (NATS refused them), applied (another replica's), dropped (invalid), own (this replica's, heard back and skipped).",
		}, []string{"result"})}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	rates.RecordSpent()
	sub, err := nc.Subscribe(s.subject, s.receive)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", s.subject, err)
	}
	// Connected: make sure the server has it before a report is missed.
	// Not connected yet: nats.go sends it on connect.
	if nc.IsConnected() {
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("subscribe to %s: %w", s.subject, err)
		}
	}
	s.sub = sub
	return s, nil
}

// Run reports what the rates took every interval, until ctx ends; it then
// reports what is left, ends the subscription to the others' reports and
// returns nil.
func (s *Sharer) Run(ctx context.Context) error {
	defer func() { _ = s.sub.Unsubscribe() }()
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.report()
			return nil
		case <-tick.C:
			s.report()
		}
	}
}

// receive debits the rates by another replica's report.
func (s *Sharer) receive(m *nats.Msg) {
	r, err := Decode(m.Data)
	if err != nil {
		s.reports.WithLabelValues(ResultDropped).Inc()
		s.log.Warn("dropping a report of spent rates", "subject", s.subject, "error", err)
		return
	}
	if r.Replica == s.replica {
		s.reports.WithLabelValues(ResultOwn).Inc()
		return
	}
	for _, spent := range r.Spent {
		s.rates.Debit(spent)
	}
	s.reports.WithLabelValues(ResultApplied).Inc()
}

// report publishes what the rates took since the last report, in reports
// of at most MaxSpentPerReport namespaces. One that cannot be sent (NATS
// down) is logged and lost: the others then see less than was taken
// until the next.
func (s *Sharer) report() {
	spent, dropped := s.rates.TakeSpent()
	if dropped > 0 {
		s.log.Warn("takes of more namespaces than recorded in an interval are not reported", "takes", dropped)
	}
	for len(spent) > 0 {
		n := min(len(spent), MaxSpentPerReport)
		data, err := json.Marshal(Report{Replica: s.replica, Spent: spent[:n]})
		if err == nil {
			err = s.nc.Publish(s.subject, data)
		}
		if err != nil {
			s.reports.WithLabelValues(ResultUnsent).Inc()
			s.log.Warn("report of spent rates not sent", "subject", s.subject, "namespaces", n, "error", err)
		} else {
			s.reports.WithLabelValues(ResultSent).Inc()
		}
		spent = spent[n:]
	}
}
