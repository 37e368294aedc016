package natsinflight

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/inflight"
)

// ErrInvalidOption is wrapped by the errors of NewPublisher and Subscribe
// about a missing dependency or a bad option.
var ErrInvalidOption = errors.New("invalid in-flight option")

// Option sets an optional setting of a Publisher or a subscription.
type Option func(*options) error

type options struct {
	subject string
	log     *slog.Logger
}

// WithSubject sets the core NATS subject of the reports (inflight.DefaultSubject
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
	o := options{subject: inflight.DefaultSubject, log: slog.New(slog.DiscardHandler)}
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
	data, err := inflight.Encode(src, counts, ttl)
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
func Subscribe(nc *nats.Conn, r inflight.Reporter, opts ...Option) (stop func(), err error) {
	if nc == nil || r == nil {
		return nil, fmt.Errorf("%w: nil NATS connection or reporter", ErrInvalidOption)
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	subject, log := o.subject, o.log
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		src, counts, ttl, err := inflight.Decode(m.Data)
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
