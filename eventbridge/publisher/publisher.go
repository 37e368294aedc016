package publisher

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadline"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
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
// GET /{app}/v1/events/subscribed.
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
	// MaxPublishing is how many requests the publisher works on at once
	// before it shares them among sender namespaces (WithSenders; every
	// request without one counts as one sender): past it, a request of a
	// sender that has its share of those in progress (MaxPublishing over
	// the senders with any) is refused (429, Retry-After) while another
	// sender has requests in progress, so that one namespace's flood
	// leaves the others theirs. Default DefaultMaxPublishing; negative:
	// no bound.
	MaxPublishing int
}

// Publisher is the HTTP handler of the publishing API. It is safe for
// concurrent use.
type Publisher struct {
	cfg     Config
	store   EventStore
	apps    Applications
	subs    SubscriptionLister
	ready   ReadyFunc
	live    ReadyFunc
	log     *slog.Logger
	metrics *metrics
	tracer  trace.Tracer // nil: no spans
	mux     *http.ServeMux
	newID   func() string
	// stores give each request's wait for JetStream its StoreTimeout.
	stores  *deadline.Windows
	senders Senders
	// admission is what every event is held to before it is stored.
	admission admission.Policy
	// rates bound the events each sender stores per second.
	rates *senderRates
	// publishing shares the requests in progress among senders.
	publishing *publishing
}

// Option configures New.
type Option func(*Publisher) error

// WithSubscriptions sets where /{app}/v1/events/subscribed lists
// Subscriptions from. Without it, that endpoint lists no events.
func WithSubscriptions(l SubscriptionLister) Option {
	return func(p *Publisher) error { p.subs = l; return nil }
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
// (kfn_eventbridge_publish_requests_total and
// kfn_eventbridge_publish_duration_seconds) with reg and records into
// them; without it the publisher records none.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(p *Publisher) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		m, err := newMetrics(reg)
		if err != nil {
			return fmt.Errorf("%w: register metrics: %w", ErrInvalidOption, err)
		}
		p.metrics = m
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
		log:   slog.New(slog.DiscardHandler),
		newID: newUUID,

		stores:     deadline.New(cfg.StoreTimeout),
		admission:  policy,
		rates:      newSenderRates(cfg),
		publishing: newPublishing(cfg.MaxPublishing),
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
		routeSubscribed: p.subscribed,
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

// errTooLarge is returned by readBody when the body is over the limit.
var errTooLarge = errors.New("request body too large")

// readBody reads the whole body within MaxRequestBytes.
func (p *Publisher) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > p.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", errTooLarge, r.ContentLength, p.cfg.MaxRequestBytes)
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxRequestBytes), r.ContentLength)
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return nil, fmt.Errorf("%w: the limit is %d bytes", errTooLarge, p.cfg.MaxRequestBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return body, nil
}

// readAll reads a request body of size bytes (-1: unknown) into one
// buffer of its size when it is known (io.ReadAll would grow its buffer
// three times for a 1 KiB event). A server's request body yields exactly
// its Content-Length.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// servePublish serves /publish and /{app}/v2/events and returns the status
// it answered.
func (p *Publisher) servePublish(w http.ResponseWriter, r *http.Request) int {
	sender, err := p.sender(r)
	if err != nil {
		return p.fail(w, r, err)
	}
	if err := p.publishing.enter(sender); err != nil {
		return p.fail(w, r, err)
	}
	defer p.publishing.leave(sender)
	body, err := p.readBody(w, r)
	if err != nil {
		return p.fail(w, r, err)
	}
	tp, ts := p.traceContext(r)
	if !cehttp.IsHTTPBatch(r.Header) {
		if e, ok := eventstore.EncodeBinary(r.Header, body, tp, ts); ok {
			return p.publishBinary(w, r, e, sender)
		}
	}
	events, err := p.parse(r.Context(), r.Header, body)
	if err != nil {
		return p.fail(w, r, err)
	}
	annotate(r, events)
	routes := make([]string, len(events))
	for i := range events {
		if routes[i], err = p.prepare(&events[i]); err != nil {
			if len(events) > 1 {
				err = fmt.Errorf("event %d of the batch: %w", i, err)
			}
			return p.fail(w, r, err)
		}
	}
	stored, err := p.encode(events, routes, tp, ts, sender)
	if err == nil {
		err = p.rates.take(sender, len(stored))
	}
	if err != nil {
		return p.fail(w, r, err)
	}
	if err := p.storeAll(r.Context(), stored); err != nil {
		return p.fail(w, r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// encode puts the events of a request in their stored form and checks
// them against the store's bounds, every one before any is stored, so
// that a batch or a legacy event (stored twice) that the store would
// refuse in part is refused whole. Each names its sender (stamp). The
// error names the event of a batch.
func (p *Publisher) encode(events []event.Event, routes []string, traceParent, traceState, sender string) ([]eventstore.Event, error) {
	out := make([]eventstore.Event, len(events))
	for i := range events {
		e, err := eventstore.Encode(&events[i], traceParent, traceState)
		if err == nil {
			e.SetRoute(routes[i])
			err = p.stamp(&e, sender)
		}
		if err == nil {
			err = e.Check()
		}
		if err != nil {
			if len(events) > 1 {
				err = fmt.Errorf("event %d of the batch: %w", i, err)
			}
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// storeAll stores the events of one request, in order, within one
// StoreTimeout.
func (p *Publisher) storeAll(ctx context.Context, events []eventstore.Event) error {
	ctx = p.stores.Context(ctx)
	for _, e := range events {
		if _, err := p.store.Put(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// publishBinary stores a binary-mode event that eventstore.EncodeBinary
// took (every attribute plainly valid), routed and typed as prepare does,
// and answers. Any other request goes through sdk-go (parse, prepare),
// which stores it alike or says why not.
func (p *Publisher) publishBinary(w http.ResponseWriter, r *http.Request, e eventstore.Event, sender string) int {
	eventType, source := e.Attribute("type"), e.Attribute("source")
	annotateEvent(r, e.Attribute("id"), eventType)
	stored, route, err := p.route(eventType, source)
	if err != nil {
		return p.fail(w, r, err)
	}
	if stored != eventType {
		e.SetType(stored)
	} else if !p.legacyType(eventType) {
		e.SetOriginalType(eventType)
	}
	e.SetRoute(route)
	if err := p.stamp(&e, sender); err != nil {
		return p.fail(w, r, err)
	}
	if err := p.rates.take(sender, 1); err != nil {
		return p.fail(w, r, err)
	}
	// The store refuses a type that maps to no subject before storing.
	if _, err := p.store.Put(p.stores.Context(r.Context()), e); err != nil {
		return p.fail(w, r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// parse reads the CloudEvents of a request: one in binary or structured
// mode, or a batch.
func (p *Publisher) parse(ctx context.Context, h http.Header, body []byte) ([]event.Event, error) {
	if cehttp.IsHTTPBatch(h) {
		var events []event.Event
		if err := json.Unmarshal(body, &events); err != nil {
			return nil, fmt.Errorf("%w: batch: %w", eventstore.ErrInvalidEvent, err)
		}
		if len(events) == 0 {
			return nil, fmt.Errorf("%w: batch: no events", eventstore.ErrInvalidEvent)
		}
		if len(events) > MaxBatchEvents {
			return nil, fmt.Errorf("%w: batch: %d events, at most %d are allowed in one request", eventstore.ErrInvalidEvent, len(events), MaxBatchEvents)
		}
		return events, nil
	}
	// In binary mode the body is the data as it is: the event is read
	// from the headers and takes the body (sdk-go would copy it into a
	// buffer of its own, grown step by step). In structured mode the body
	// is the event.
	msg := cehttp.NewMessage(h, nil)
	binary := msg.ReadEncoding() == binding.EncodingBinary
	if !binary {
		msg = cehttp.NewMessage(h, io.NopCloser(bytes.NewReader(body)))
	}
	e, err := binding.ToEvent(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err)
	}
	if binary && len(body) > 0 {
		e.DataEncoded = body
	}
	return []event.Event{*e}, nil
}

// prepare validates a published event as Kyma's publisher does and
// returns the source to route it by ("" for its own). A type with the
// legacy prefix is cleaned, its application replaced by the Application's
// type when an Application of that name has one; any other event whose
// source names an Application is routed by the Application's type.
func (p *Publisher) prepare(e *event.Event) (string, error) {
	if err := e.Validate(); err != nil {
		return "", fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err)
	}
	source := e.Source()
	eventType, route, err := p.route(e.Type(), source)
	if err != nil {
		return "", err
	}
	if eventType != e.Type() {
		e.SetType(eventType)
	} else if !p.legacyType(eventType) {
		e.SetExtension(OriginalTypeExtension, eventType)
	}
	if err := checkSubject(cmp.Or(route, source), eventType); err != nil {
		return "", err
	}
	return route, nil
}

// route returns the type an event of eventType from source is stored
// with and the source to route it by ("" for its own), as Kyma's publisher
// does: a type with the legacy prefix is cleaned, its application replaced
// by the Application's type when an Application of that name has one; any
// other event whose source names an Application is routed by the
// Application's type.
func (p *Publisher) route(eventType, source string) (string, string, error) {
	if p.legacyType(eventType) {
		app, name, version, err := v1alpha2.ParseLegacyEventType(p.cfg.LegacyPrefix, eventType)
		if err != nil {
			return "", "", fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err)
		}
		if t, ok := p.applicationType(app); ok {
			app = t
		}
		return v1alpha2.LegacyEventType(p.cfg.LegacyPrefix, app, name, version), "", nil
	}
	route, _ := p.applicationType(source)
	return eventType, route, nil
}

// legacyType reports whether eventType has the legacy prefix: Kyma's
// publisher cleans such a type and adds no OriginalTypeExtension.
func (p *Publisher) legacyType(eventType string) bool {
	return strings.HasPrefix(eventType, p.cfg.LegacyPrefix+".")
}

// applicationType returns the application type of the Application called
// name (its application-type label, or its name), when there is one.
func (p *Publisher) applicationType(name string) (string, bool) {
	if p.apps == nil || name == "" {
		return "", false
	}
	return p.apps.TypeOrName(name)
}

// checkSubject checks that an event of eventType routed by routeSource
// maps to a subject.
func checkSubject(routeSource, eventType string) error {
	if _, err := v1alpha2.EventSubject(routeSource, eventType); err != nil {
		return fmt.Errorf("%w: %w", eventstore.ErrInvalidEvent, err)
	}
	return nil
}

// StatusCode maps an error of the publishing path to its HTTP status.
func StatusCode(err error) int {
	switch {
	case errors.Is(err, errTooLarge), errors.Is(err, eventstore.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, eventstore.ErrInvalidEvent):
		return http.StatusBadRequest
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, auth.ErrTooManyReviews), errors.Is(err, ErrTooManyEvents), errors.Is(err, ErrOverShare):
		return http.StatusTooManyRequests
	case errors.Is(err, admission.ErrReserved):
		return http.StatusForbidden
	case errors.Is(err, eventstore.ErrStorageFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, eventstore.ErrUnavailable):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// fail answers a CloudEvents request with the status of err and its text.
func (p *Publisher) fail(w http.ResponseWriter, r *http.Request, err error) int {
	code := StatusCode(err)
	p.logFailure(r, code, err)
	if code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, err.Error(), code)
	return code
}

func (p *Publisher) logFailure(r *http.Request, code int, err error) {
	level := slog.LevelDebug // the client is told; a bad request is its problem
	if code >= 500 {
		level = slog.LevelWarn
	}
	p.log.Log(r.Context(), level, "publish failed", "path", r.URL.Path, "code", code, "error", err)
}
