package inflight

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultSubject is the core NATS subject of in-flight reports.
const DefaultSubject = "kfn.scaler.inflight"

// Bounds of a report.
const (
	// MaxTTL is the longest validity a report may claim.
	MaxTTL = time.Minute
	// MaxFunctions is the most Functions one report may count.
	MaxFunctions = 10000
)

// ErrInvalidReport is wrapped by every error of [Decode].
var ErrInvalidReport = errors.New("invalid in-flight report")

// ErrInvalidOption is wrapped by the errors of NewPublisher and Subscribe
// about a missing dependency or a bad option.
var ErrInvalidOption = errors.New("invalid in-flight option")

// Option sets an optional setting of a Publisher or a subscription.
type Option func(*options) error

type options struct {
	subject string
	log     *slog.Logger
}

// WithSubject sets the core NATS subject of the reports (DefaultSubject
// without it); an empty subject is refused.
func WithSubject(subject string) Option {
	return func(o *options) error {
		if subject == "" {
			return fmt.Errorf("%w: empty subject", ErrInvalidOption)
		}
		o.subject = subject
		return nil
	}
}

// WithLogger sets the logger of what is not sent or dropped; the default
// discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.log = l
		return nil
	}
}

func apply(opts []Option) (options, error) {
	o := options{subject: DefaultSubject, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Report is the message on the subject: what one gateway instance has in
// flight now, replacing its previous report.
type Report struct {
	// Source names the gateway instance (unique per replica).
	Source string `json:"source"`
	// TTLMillis is how long the counts are valid, in milliseconds.
	TTLMillis int64 `json:"ttlMillis"`
	// Functions are the counts; a Function absent has none.
	Functions []Count `json:"functions,omitempty"`
}

// Count is the requests in flight for one Function.
type Count struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	InFlight  int    `json:"inFlight"`
}

// Reporter receives decoded reports; *activity.Scaler implements it.
type Reporter interface {
	ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration)
}

// Encode returns the message of one report (Functions sorted, for stable
// output).
func Encode(src string, counts map[types.NamespacedName]int, ttl time.Duration) ([]byte, error) {
	r := Report{Source: src, TTLMillis: ttl.Milliseconds()}
	for fn, n := range counts {
		if n > 0 {
			r.Functions = append(r.Functions, Count{Namespace: fn.Namespace, Name: fn.Name, InFlight: n})
		}
	}
	sort.Slice(r.Functions, func(i, j int) bool {
		a, b := r.Functions[i], r.Functions[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode in-flight report: %w", err)
	}
	return data, nil
}

// Decode parses and checks one message. The error wraps ErrInvalidReport
// and says what is wrong; nothing is returned with it.
func Decode(data []byte) (src string, counts map[types.NamespacedName]int, ttl time.Duration, err error) {
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return "", nil, 0, fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	if r.Source == "" {
		return "", nil, 0, fmt.Errorf("%w: no source", ErrInvalidReport)
	}
	ttl = time.Duration(r.TTLMillis) * time.Millisecond
	if ttl <= 0 || ttl > MaxTTL {
		return "", nil, 0, fmt.Errorf("%w: ttlMillis %d out of 1..%d", ErrInvalidReport, r.TTLMillis, MaxTTL.Milliseconds())
	}
	if len(r.Functions) > MaxFunctions {
		return "", nil, 0, fmt.Errorf("%w: %d functions, at most %d", ErrInvalidReport, len(r.Functions), MaxFunctions)
	}
	counts = make(map[types.NamespacedName]int, len(r.Functions))
	for _, c := range r.Functions {
		if c.Namespace == "" || c.Name == "" || c.InFlight < 0 {
			return "", nil, 0, fmt.Errorf("%w: bad count %+v", ErrInvalidReport, c)
		}
		counts[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] += c.InFlight
	}
	return r.Source, counts, ttl, nil
}

// Publisher sends a gateway's reports on a subject. It implements the
// gateway's InFlightReporter.
type Publisher struct {
	nc      *nats.Conn
	subject string
	log     *slog.Logger
}

// NewPublisher returns a Publisher on nc. The error wraps ErrInvalidOption.
func NewPublisher(nc *nats.Conn, opts ...Option) (*Publisher, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil NATS connection", ErrInvalidOption)
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	return &Publisher{nc: nc, subject: o.subject, log: o.log}, nil
}

// ReportInFlight publishes the report. It does not wait for the server; a
// report that cannot be sent (NATS down) is logged and lost, and the
// gateway's next periodic report takes its place.
func (p *Publisher) ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration) {
	data, err := Encode(src, counts, ttl)
	if err == nil {
		err = p.nc.Publish(p.subject, data)
	}
	if err != nil {
		p.log.Warn("in-flight report not sent", "subject", p.subject, "error", err)
	}
}

// Subscribe delivers every valid report on the subject to r, and drops
// invalid ones with a warning. The subscription survives reconnects; stop
// ends it. A missing nc or r, or a bad option, is an error wrapping
// ErrInvalidOption.
func Subscribe(nc *nats.Conn, r Reporter, opts ...Option) (stop func(), err error) {
	if nc == nil || r == nil {
		return nil, fmt.Errorf("%w: nil NATS connection or reporter", ErrInvalidOption)
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	subject, log := o.subject, o.log
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		src, counts, ttl, err := Decode(m.Data)
		if err != nil {
			log.Warn("dropping an in-flight report", "subject", subject, "error", err)
			return
		}
		r.ReportInFlight(src, counts, ttl)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	// Connected: make sure the server has it before relying on it. Not
	// connected yet: nats.go sends it on connect.
	if nc.IsConnected() {
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
		}
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
