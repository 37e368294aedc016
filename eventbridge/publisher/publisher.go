package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadline"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/seats"
)

// Defaults of Config.
const (
	DefaultMaxRequestBytes = 1 << 20
	DefaultStoreTimeout    = 10 * time.Second
	DefaultLegacySource    = "kyma"
	// DefaultSenderRate is the Config.SenderRate the event bridge sets by
	// default (the package's zero value is no bound): a tenth of what one
	// publisher stores at most on the machine of BENCHMARKS.md.
	DefaultSenderRate = 1000
	// DefaultSenderBytesRate is the Config.SenderBytesRate the event
	// bridge sets by default (the package's zero value is no bound): 1,000
	// events a second (DefaultSenderRate) of 2 KiB, or 2 of the largest,
	// an eighth of the bytes the bridge moves on the 2 cores of
	// BENCHMARKS.md (16k events of 1 KiB a second). What one namespace
	// stores costs the others by the byte, whatever the size of its
	// events: another namespace's p99 was 1.2x its p99 alone beside one
	// storing 2 MiB a second, 1.75x beside 4 and 2.8-3.4x beside 8
	// (`bench/eventbridge -hostile -attacks "large events"`).
	DefaultSenderBytesRate = 2 << 20
)

// MaxHeaderBytes is the http.Server MaxHeaderBytes a server of the
// publisher sets: a request's headers over it get 431 from net/http. It
// leaves room for the largest set of attributes the store takes
// (eventstore.MaxAttributeBytes, 32 KiB, refused with 413 and the reason
// past it) beside the trace context and HTTP's own headers; net/http's
// default is 1 MiB.
const MaxHeaderBytes = 64 << 10

// MaxBatchEvents bounds the events of one batch request
// (application/cloudevents-batch+json): they are stored one after the
// other within one StoreTimeout, and a batch is all or nothing for its
// client.
const MaxBatchEvents = 100

// OriginalTypeExtension is the extension that holds the type an event was
// published with (see eventstore.OriginalTypeExtension).
const OriginalTypeExtension = eventstore.OriginalTypeExtension

// ErrInvalidOption is wrapped by errors of New about its options.
var ErrInvalidOption = errors.New("invalid publisher option")

// EventStore stores events; *eventstore.Store is the implementation.
type EventStore interface {
	// Put stores an event in its stored form (eventstore.Encode's or
	// EncodeBinary's, with its trace context, route and sender) and
	// answers once it is stored. Errors wrap the sentinels of package
	// eventstore.
	Put(ctx context.Context, e eventstore.Event) (eventstore.Result, error)
}

// Applications looks up Kyma Applications (applicationconnector.kyma-project.io)
// by name; *applications.Watcher is the implementation.
type Applications interface {
	// TypeOrName returns the Application's application-type label, or its
	// name when it has none, and false when there is no such Application.
	TypeOrName(name string) (string, bool)
}

// SubscriptionLister lists the Subscriptions of every namespace, for
// GET /{app}/v1/events/subscribed, which only reads them: they may be a
// cache's own objects.
type SubscriptionLister interface {
	ListSubscriptions(ctx context.Context) ([]v1alpha2.Subscription, error)
}

// ReadyFunc reports whether the publisher can store events now (for
// /readyz); nil means ready.
type ReadyFunc func(ctx context.Context) error

// Config configures a Publisher. The zero value of a field means its
// default.
type Config struct {
	// MaxRequestBytes bounds a request body; larger requests get 413.
	// Default 1 MiB.
	MaxRequestBytes int64
	// StoreTimeout bounds the wait for JetStream to store a request's
	// events; past it the answer is 503. Requests that arrive together
	// share their deadline, so a request waits at most a 64th of it more.
	// A client that goes away does not end the wait. Default 10s.
	StoreTimeout time.Duration
	// LegacyPrefix is the prefix of legacy event types
	// (sap.kyma.custom by default).
	LegacyPrefix string
	// LegacySource is the source of the copy of each legacy event that
	// exact-matching Subscriptions receive (Kyma publishes legacy events
	// twice: for standard matching with the application as source, and
	// for exact matching with the full legacy type). Default "kyma".
	LegacySource string
	// Reserved keeps sources for the senders of some namespaces (see
	// admission.Reservation; needs WithSenders). None: anyone may publish
	// anything, Kyma's model.
	Reserved []admission.Reservation
	// MaxHops bounds chains of events: an event whose hop count
	// (eventstore.HopsExtension, which a Function's host sets on the
	// events it emits to that of the event it handles plus one) is over it
	// is refused (400), as a sink's reply over it is dropped. Default
	// admission.DefaultMaxHops.
	MaxHops int
	// SenderRate bounds the events one sender namespace (WithSenders)
	// stores, per second on average, in bursts of at most SenderBurst
	// (default the larger of SenderRate and MaxBatchEvents): a request
	// past it is refused whole (429, Retry-After), so that a namespace's
	// flood, or a function that emits the events it receives with a hop
	// count of its own making, leaves the publisher to the others. 0: no
	// bound.
	SenderRate  float64
	SenderBurst int
	// AnonymousRate and AnonymousBurst are the same bound for every
	// publish without a namespace (no token, a user's token, no Senders)
	// together: they cannot be told apart. 0: no bound, Kyma's model;
	// with senders, a function that leaves its token out publishes
	// without a namespace, and this is its bound.
	AnonymousRate  float64
	AnonymousBurst int
	// SenderBytesRate and AnonymousBytesRate bound the bytes of the same
	// senders, as SenderRate and AnonymousRate their events, in bursts of
	// the larger of the rate and MaxRequestBytes: a request's body is
	// taken before it is read when its length is told, and a sink's reply
	// waits for its bytes as for its event. 0: no bound.
	SenderBytesRate, AnonymousBytesRate float64
	// MaxPublishing is how many requests the publisher works on at once
	// before it shares them among sender namespaces (WithSenders; every
	// request without one counts as one sender): past it, a request of a
	// sender that has its share of those in progress (MaxPublishing over
	// the senders with any) is refused (429, Retry-After) while another
	// sender has requests in progress, so that one namespace's flood
	// leaves the others theirs. Default DefaultMaxPublishing; negative:
	// no bound.
	MaxPublishing int
	// PublishingPerNamespace bounds the requests of one sender namespace
	// (WithSenders) the publisher works on at once from their read body to
	// their answer: decoding, checks, the stores and their
	// acknowledgements. A namespace's requests past it wait in its own
	// queue, in order, at most StoreTimeout (then 503 with Retry-After).
	// JetStream takes a stream's stores in the order they come, so without
	// it a namespace's burst of publishes (100 at once, well within its
	// rate) stands in front of the next namespace's event; with it, at
	// most this many do. It bounds a namespace's rate of stores to about
	// itself over a store's time (4 over 0.5 ms: 8,000 a second, past the
	// default SenderRate). Publishes without a namespace are not held to
	// it (their rate is AnonymousRate). Default
	// DefaultPublishingPerNamespace; negative: no bound.
	PublishingPerNamespace int
}

// DefaultPublishingPerNamespace is Config.PublishingPerNamespace by
// default.
const DefaultPublishingPerNamespace = 4

// ErrBusy is wrapped by the refusal (503, Retry-After) of a request that
// waited Config.StoreTimeout for its turn among its namespace's
// (Config.PublishingPerNamespace).
var ErrBusy = errors.New("the publisher is busy")

// Publisher is the HTTP handler of the publishing API. It is safe for
// concurrent use.
type Publisher struct {
	cfg   Config
	store EventStore
	apps  Applications
	// subscribed answers /{app}/v1/events/subscribed; nil: no events.
	subscribed *subscribedView
	ready      ReadyFunc
	live       ReadyFunc
	log        *slog.Logger
	// failLines bounds the lines logged about failed requests.
	failLines *logging.Budget
	metrics   *metrics
	tracer    trace.Tracer // nil: no spans
	// skipUnsampled: the tracer's provider records no child of an
	// unsampled parent (WithTracerProvider).
	skipUnsampled bool
	// roots decide a new trace's sampling before a span is started (the
	// provider's, tracing.RootsOf); nil: its span is started to decide.
	roots *tracing.Roots
	mux   *http.ServeMux
	newID func() string
	// stores give each request's wait for JetStream its StoreTimeout.
	stores  *deadline.Windows
	senders Senders
	// admission is what every event is held to before it is stored.
	admission admission.Policy
	// rates bound the events each sender stores per second.
	rates *admission.Rates
	// publishing shares the requests in progress among senders.
	publishing *publishing
	// turns hold each sender namespace's read requests to
	// PublishingPerNamespace at once.
	turns *seats.Gate
}

// Option configures New.
type Option func(*Publisher) error

// WithSubscriptions sets where /{app}/v1/events/subscribed lists
// Subscriptions from, at most once per SubscribedFresh. Without it, that
// endpoint lists no events.
func WithSubscriptions(l SubscriptionLister) Option {
	return func(p *Publisher) error { p.subscribed = newSubscribedView(l, p.cfg.LegacyPrefix); return nil }
}

// WithApplications routes the events of Kyma Applications as Kyma's
// publisher does when Applications exist: an event whose source (or, for
// a legacy event, whose application) names an Application is routed by the
// Application's application-type label when it has one (see publishing).
// Without it, no source names an Application.
func WithApplications(a Applications) Option {
	return func(p *Publisher) error { p.apps = a; return nil }
}

// WithLive sets the liveness check of /healthz (a NATS connection that
// cannot come back, say). Without it, /healthz is always 200.
func WithLive(f ReadyFunc) Option {
	return func(p *Publisher) error { p.live = f; return nil }
}

// WithReady sets the readiness check of /readyz. Without it, /readyz is
// always 200.
func WithReady(f ReadyFunc) Option {
	return func(p *Publisher) error { p.ready = f; return nil }
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(p *Publisher) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		p.log = l
		return nil
	}
}

// WithMetrics registers the publisher's metrics
// (kfn_eventbridge_publish_requests_total,
// kfn_eventbridge_publish_duration_seconds, and the gauges
// kfn_eventbridge_publish_in_progress of Config.MaxPublishing and
// kfn_eventbridge_publish_namespaced_in_progress and _waiting of
// Config.PublishingPerNamespace) with reg and records into them; without
// it the publisher records none.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(p *Publisher) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		m, err := newMetrics(reg, p.publishing, p.turns)
		if err != nil {
			return fmt.Errorf("%w: register metrics: %w", ErrInvalidOption, err)
		}
		p.metrics = m
		return nil
	}
}

// ErrTooManyEvents is wrapped by the refusal (429) of a request whose
// events would take its sender past its rate (Config.SenderRate,
// AnonymousRate).
var ErrTooManyEvents = admission.ErrTooManyEvents

// SenderRates returns the buckets of Config.SenderRate and AnonymousRate, with
// their bursts' defaults, or an error wrapping ErrInvalidOption. New makes
// them; WithRates shares them with the sinks' replies
// (dispatcher.WithReplyRates).
func SenderRates(cfg Config) (*admission.Rates, error) {
	for _, b := range []struct {
		rate  float64
		burst *int
	}{{cfg.SenderRate, &cfg.SenderBurst}, {cfg.AnonymousRate, &cfg.AnonymousBurst}} {
		switch {
		case b.rate < 0:
			return nil, fmt.Errorf("%w: a rate of events must not be negative", ErrInvalidOption)
		case *b.burst == 0:
			*b.burst = max(int(b.rate), MaxBatchEvents)
		case *b.burst < MaxBatchEvents:
			return nil, fmt.Errorf("%w: a burst of %d events is less than a batch's %d", ErrInvalidOption, *b.burst, MaxBatchEvents)
		}
	}
	if cfg.SenderBytesRate < 0 || cfg.AnonymousBytesRate < 0 {
		return nil, fmt.Errorf("%w: a rate of bytes must not be negative", ErrInvalidOption)
	}
	r := admission.NewRates(cfg.SenderRate, cfg.SenderBurst, cfg.AnonymousRate, cfg.AnonymousBurst)
	largest := max(cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	burst := func(rate float64) int { return int(min(max(int64(rate), largest), 1<<31-1)) }
	r.LimitBytes(cfg.SenderBytesRate, burst(cfg.SenderBytesRate), cfg.AnonymousBytesRate, burst(cfg.AnonymousBytesRate))
	return r, nil
}

// WithRates makes the publisher take its senders' events from r instead
// of buckets of its own (Config.SenderRate and AnonymousRate are then
// r's): the event bridge gives the same buckets to the dispatcher, so that
// a namespace's publishes and its sinks' replies share its one rate.
func WithRates(r *admission.Rates) Option {
	return func(p *Publisher) error {
		if r == nil {
			return fmt.Errorf("%w: nil rates", ErrInvalidOption)
		}
		p.rates = r
		return nil
	}
}

// New returns a Publisher storing events into store.
func New(store EventStore, cfg Config, opts ...Option) (*Publisher, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil event store", ErrInvalidOption)
	}
	if cfg.MaxRequestBytes < 0 {
		return nil, fmt.Errorf("%w: max request bytes must not be negative", ErrInvalidOption)
	}
	rates, err := SenderRates(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.LegacyPrefix == "" {
		cfg.LegacyPrefix = v1alpha2.DefaultLegacyPrefix
	}
	if cfg.LegacySource == "" {
		cfg.LegacySource = DefaultLegacySource
	}
	if cfg.MaxPublishing == 0 {
		cfg.MaxPublishing = DefaultMaxPublishing
	}
	if cfg.PublishingPerNamespace == 0 {
		cfg.PublishingPerNamespace = DefaultPublishingPerNamespace
	}
	if cfg.MaxHops == 0 {
		cfg.MaxHops = admission.DefaultMaxHops
	}
	policy := admission.Policy{Reserved: cfg.Reserved, LegacyPrefix: cfg.LegacyPrefix, MaxHops: cfg.MaxHops}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	p := &Publisher{
		cfg:   cfg,
		store: store,
		log:   slog.New(slog.DiscardHandler), failLines: logging.NewBudget(FailureLinesPerSecond),
		newID: newUUID,

		stores:     deadline.New(cfg.StoreTimeout),
		admission:  policy,
		rates:      rates,
		publishing: newPublishing(cfg.MaxPublishing),
		turns:      seats.New(cfg.PublishingPerNamespace),
	}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	handlers := map[string]http.HandlerFunc{
		routePublish:    p.instrument("publish", routePublish, p.servePublish),
		routeV2:         p.instrument("v2", routeV2, p.servePublish),
		routeV1:         p.instrument("v1", routeV1, p.serveLegacy),
		routeSubscribed: p.serveSubscribed,
		routeHealthz:    func(w http.ResponseWriter, r *http.Request) { check(w, r, p.live) },
		routeReadyz:     func(w http.ResponseWriter, r *http.Request) { check(w, r, p.ready) },
	}
	mux := http.NewServeMux()
	for _, route := range Routes() {
		mux.HandleFunc(route, handlers[route])
	}
	p.mux = mux
	return p, nil
}

// The publisher's routes, in net/http's ServeMux pattern syntax.
const (
	routePublish    = "POST /publish"
	routeV2         = "POST /{app}/v2/events"
	routeV1         = "POST /{app}/v1/events"
	routeSubscribed = "GET /{app}/v1/events/subscribed"
	routeHealthz    = "GET /healthz"
	routeReadyz     = "GET /readyz"
)

// Routes are the ServeMux patterns the Publisher serves, and only those: a
// host that mounts the publisher beside other handlers on one listener
// (kfn dev) routes these to it.
func Routes() []string {
	return []string{routePublish, routeV2, routeV1, routeSubscribed, routeHealthz, routeReadyz}
}

// ServeHTTP serves the publishing API.
func (p *Publisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mux.ServeHTTP(w, r)
}

// check answers a probe: 503 with the reason when f fails, else 200.
func check(w http.ResponseWriter, r *http.Request, f ReadyFunc) {
	if f != nil {
		if err := f(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
