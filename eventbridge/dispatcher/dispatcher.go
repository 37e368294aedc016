package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/deadline"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/budget"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/delivery"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/observe"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher/schedule"
	"github.com/kfn-dev/kfn/eventbridge/reply"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

// Dispatcher delivers events for a changing set of Subscriptions. Tell it
// the Subscriptions with Upsert and Remove (any time, from any goroutine);
// Start runs the deliveries. Several Dispatchers, in one process or many,
// may serve the same Subscriptions: they share the durable consumers, each
// asks every consumer for events, JetStream hands each event to one of
// them, and its MaxAckPending bounds the events in flight across all of
// them. The events of a Dispatcher that dies are handed to the others
// after the consumer's ack wait.
//
// The scheduling of each Subscription's deliveries is package
// schedule's, the attempts package delivery's, the budgets packages
// budget's and slots', what is recorded package observe's: a Dispatcher
// assembles them from its Config and Options.
type Dispatcher struct {
	cfg Config
	js  jetstream.JetStream
	// Set by the options.
	endpoints Endpoints
	resolver  Resolver
	transport http.RoundTripper
	log       *slog.Logger
	metrics   *observe.Metrics
	observers []Observer
	tracer    trace.Tracer // nil: no spans
	// skipUnsampled: the tracer's provider records no child of an
	// unsampled parent (observe.Config.SkipUnsampled).
	skipUnsampled bool
	rates         *admission.Rates // nil: replies unbounded in rate
	// Made by New.
	rec   *observe.Recorder
	sched *schedule.Scheduler
}

// Option configures New.
type Option func(*Dispatcher) error

// WithEndpoints sets how sink readiness is known; default AlwaysReady.
func WithEndpoints(e Endpoints) Option {
	return func(d *Dispatcher) error {
		if e == nil {
			return fmt.Errorf("%w: nil endpoints", ErrInvalidOption)
		}
		d.endpoints = e
		return nil
	}
}

// WithResolver sets how sinks map to URLs; default DirectResolver.
func WithResolver(r Resolver) Option {
	return func(d *Dispatcher) error {
		if r == nil {
			return fmt.Errorf("%w: nil resolver", ErrInvalidOption)
		}
		d.resolver = r
		return nil
	}
}

// WithTransport sets the transport deliveries are sent with; by default
// NewTransport(Config.Egress). One of another's should wrap
// NewTransport's, so that the egress policy holds (kfn dev records each
// attempt around it). Config.RequestTimeout bounds each request.
func WithTransport(rt http.RoundTripper) Option {
	return func(d *Dispatcher) error {
		if rt == nil {
			return fmt.Errorf("%w: nil transport", ErrInvalidOption)
		}
		d.transport = rt
		return nil
	}
}

// WithReplyRates counts each sink's CloudEvent reply as an event its
// Subscription's namespace stores, in r: a reply past the namespace's rate
// is not stored and its delivery is retried (reply.RateLimited). The
// event bridge passes the buckets its publisher takes publishes from
// (publisher.WithRates), so that a namespace's sinks cannot store more
// than its publishers may. Default: replies are not bounded in rate.
func WithReplyRates(r *admission.Rates) Option {
	return func(d *Dispatcher) error {
		if r == nil {
			return fmt.Errorf("%w: nil reply rates", ErrInvalidOption)
		}
		d.rates = r
		return nil
	}
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(d *Dispatcher) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		d.log = l
		return nil
	}
}

// WithMetrics registers the dispatcher's per-Subscription metrics (listed
// at observe.NewMetrics) with reg and records into them; it fails on a nil
// reg and when reg already holds them.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(d *Dispatcher) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		m, err := observe.NewMetrics(reg)
		if err != nil {
			return fmt.Errorf("%w: register metrics: %w", ErrInvalidOption, err)
		}
		d.metrics = m
		return nil
	}
}

// WithObserver adds o to the observers told of every Step.
func WithObserver(o Observer) Option {
	return func(d *Dispatcher) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidOption)
		}
		d.observers = append(d.observers, o)
		return nil
	}
}

// WithTracerProvider makes the dispatcher record spans with tp (listed in
// package observe): a client span per delivery attempt, whose context goes
// to the sink as traceparent, the time an event waited before its first
// attempt, a sink's reply published, and an event given up. Without it no
// span is made and the stored trace context goes to the sink unchanged;
// so too for an event whose trace is not sampled when tp records no child
// of an unsampled parent (tracing.SkipsUnsampled: otlp.Provider with a
// parent-based sampler, the default).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(d *Dispatcher) error {
		if tp != nil {
			d.tracer = tp.Tracer("github.com/kfn-dev/kfn/eventbridge/dispatcher")
			d.skipUnsampled = tracing.SkipsUnsampled(tp)
		}
		return nil
	}
}

// New returns a Dispatcher that pulls through js and publishes replies and
// dead letters through it.
func New(js jetstream.JetStream, cfg Config, opts ...Option) (*Dispatcher, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidOption)
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg: cfg, js: js,
		endpoints: AlwaysReady{}, resolver: DirectResolver, transport: NewTransport(cfg.Egress),
		log: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		if err := o(d); err != nil {
			return nil, err
		}
	}
	d.rec = observe.NewRecorder(observe.Config{
		Observers: d.observers, Tracer: d.tracer, SkipUnsampled: d.skipUnsampled, Metrics: d.metrics, DeadLetterStream: cfg.Streams.DeadLetterStream,
	})
	sender := delivery.NewSender(delivery.Config{
		JetStream: js, Transport: d.transport, Resolver: d.resolver,
		Deadlines:   deadline.New(cfg.RequestTimeout),
		Replies:     reply.NewStore(js, cfg.Streams, cfg.admission(), d.rates),
		DeadLetters: deadletter.NewWriter(js, cfg.Streams),
		Jitter:      cfg.Jitter, MaxReplyBytes: cfg.MaxReplyBytes, LogLinesPerNamespace: cfg.LogLinesPerNamespace,
		MaxInFlight: cfg.MaxInFlight, MaxInFlightPerNamespace: cfg.MaxInFlightPerNamespace,
	})
	d.sched = schedule.New(js, schedule.Config{
		Streams: cfg.Streams, Defaults: cfg.Delivery,
		PullExpiry: cfg.PullExpiry, BudgetInterval: cfg.BudgetInterval, ShutdownGrace: cfg.ShutdownGrace,
		MaxHeldBytes: cfg.MaxHeldBytes, MaxHeldBytesPerSubscription: cfg.MaxHeldBytesPerSubscription,
		DeliverySlots: cfg.DeliverySlots, DeliverySlotsPerNamespace: cfg.DeliverySlotsPerNamespace, SlotTime: cfg.SlotTime,
		RetryRate: cfg.RetryRatePerNamespace, RetryBurst: cfg.RetryBurstPerNamespace,
		StreamingPerNamespace: cfg.StreamingConsumersPerNamespace, ConsumerTurn: cfg.ConsumerTurn,
		Budget: budget.Config{
			Streams: cfg.Streams, NamespaceMaxBacklog: cfg.NamespaceMaxBacklog, NamespaceMaxBacklogBytes: cfg.NamespaceMaxBacklogBytes,
		},
	}, schedule.Parts{Sender: sender, Recorder: d.rec, Endpoints: d.endpoints, Log: d.log})
	return d, nil
}

// Upsert starts serving the Subscription, or restarts its worker if what
// matters for delivery (sink, types, source, matching, config) changed. It
// does not create the consumer: the Subscription reconciler (or local
// mode) does, and the worker waits until it exists.
//
// A Subscription whose spec cannot be served (the error wraps
// v1alpha2.ErrInvalidSink, v1alpha2.ErrInvalidConfig or
// v1alpha2.ErrInvalidEventType) gets a worker that delivers nothing: its
// consumer is kept while the spec is fixed (package subscription), and the
// worker holds the events waiting in it within the backlog budget, giving
// up the oldest past it with the reason (schedule.Scheduler.Upsert).
func (d *Dispatcher) Upsert(sub *v1alpha2.Subscription) error { return d.sched.Upsert(sub) }

// Remove stops serving the Subscription. Deliveries in progress finish.
func (d *Dispatcher) Remove(namespace, name string) { d.sched.Remove(namespace, name) }

// Serving reports whether the Subscription is being served: its events
// delivered (not only held while its spec is invalid).
func (d *Dispatcher) Serving(namespace, name string) bool { return d.sched.Serving(namespace, name) }

// Holding reports whether the Subscription's events are held, not
// delivered, because its spec cannot be served (see Upsert).
func (d *Dispatcher) Holding(namespace, name string) bool { return d.sched.Holding(namespace, name) }

// Counts returns the Subscription's delivery counts since it was first
// served (Upsert) after being removed or never served. It returns false
// when the dispatcher does not serve it. Safe for concurrent use.
func (d *Dispatcher) Counts(namespace, name string) (Counts, bool) {
	if !d.Serving(namespace, name) {
		return Counts{}, false
	}
	return d.rec.Counts(namespace, name), true
}

// Start serves the Subscriptions until ctx is done, then stops pulling,
// waits for the deliveries in progress (at most Config.ShutdownGrace, then
// ends them: their events come again after the ack wait), and returns nil. It is a
// controller-runtime Runnable and may be called once. It fails at once if
// it cannot subscribe to the answers of its pull requests (the connection
// is closed).
func (d *Dispatcher) Start(ctx context.Context) error { return d.sched.Run(ctx) }
