package eventbridge

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Option is what a host may add to an event bridge beside its Config and
// Environment: where its logs, metrics and spans go, who may call its
// listeners, and kfn dev's hooks.
type Option func(*options)

// options are the Options given to New.
type options struct {
	log         *slog.Logger
	metrics     prometheus.Registerer
	tracer      trace.TracerProvider
	token       []byte
	access      Access
	inFlight    gateway.InFlightReporter
	observer    dispatcher.Observer
	transport   func(http.RoundTripper) http.RoundTripper
	store       func(publisher.EventStore) publisher.EventStore
	reconnected <-chan struct{}
}

// WithLogger sets the root logger (package logging): each part logs under
// its component name. Without it, nothing is logged.
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// WithMetrics registers every part's metrics on reg. Without it, none.
func WithMetrics(reg prometheus.Registerer) Option { return func(o *options) { o.metrics = reg } }

// WithTracer makes the publisher's and the dispatcher's spans with tp.
// Without it, none.
func WithTracer(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// WithToken sets the bearer token the publisher's handler requires, and
// the gateway's without Access.Gateway (auth.RequireToken: in
// auth.TokenHeader beside a sender's identity, which Access.Senders then
// checks too, or as the bearer token). Without it (or empty), none.
func WithToken(token []byte) Option { return func(o *options) { o.token = token } }

// Access is who may call the event bridge's listeners, and who sends each
// event, as Kubernetes says (package auth). A nil field is not checked.
type Access struct {
	// Admin authenticates the callers of the dead-letter admin API as
	// Kubernetes does and lets each do only what RBAC grants them on the
	// dead letters of a namespace (deadletter.Resource); Run follows the
	// cluster's client CA for it. Nil: whoever reaches the admin API's
	// listener may use it (kfn dev, on the user's own loopback).
	Admin *auth.Kubernetes
	// Gateway authenticates the gateway's callers as Kubernetes does and
	// lets each call only the Functions RBAC grants them gateway.Invoke on
	// (functions/invoke in the Function's namespace); the bearer token or
	// client certificate it took is not passed on to the Function. It may
	// be Admin itself. Nil: the token (WithToken), when set, guards the
	// gateway.
	Gateway *auth.Kubernetes
	// Senders tells the publisher which namespace sends each event from
	// the token it carries (a Function's host sends its pod's), which it
	// records as the extension publisher.SenderExtension, and holds each
	// namespace to its bounds; a token it does not know is refused (401).
	// In a cluster it is an *auth.Kubernetes (ServiceAccount tokens,
	// which may be Admin itself); kfn dev gives each Function's process a
	// token of its namespace. The dependency cache
	// (Config.DependencyCache) learns its callers' namespaces from it,
	// and is off without it.
	Senders publisher.Senders
	// DependencyWriters tells the dependency cache which upload is the
	// install step of a pod of the object's own dependency set (its
	// writer token); the cache is off without it, as without Senders.
	DependencyWriters depcache.Writers
}

// WithAccess sets who may call the listeners (Access).
func WithAccess(a Access) Option { return func(o *options) { o.access = a } }

// WithInFlight makes the gateway report its in-flight counts to r (kfn
// dev's scaler). Without it, they are published on
// Config.GatewayInFlightSubject for the scalers (package inflight).
func WithInFlight(r gateway.InFlightReporter) Option { return func(o *options) { o.inFlight = r } }

// WithObserver tells ob every delivery step (kfn dev's path of recent
// events).
func WithObserver(ob dispatcher.Observer) Option { return func(o *options) { o.observer = ob } }

// WithTransport wraps the transport deliveries go through.
func WithTransport(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(o *options) { o.transport = wrap }
}

// WithStore wraps the event store the publisher writes to.
func WithStore(wrap func(publisher.EventStore) publisher.EventStore) Option {
	return func(o *options) { o.store = wrap }
}

// WithReconnected makes Run, after each value on reconnected (sent after
// each reconnect of the NATS connection: it may be a new, empty server
// then), make the streams and the consumers again.
func WithReconnected(reconnected <-chan struct{}) Option {
	return func(o *options) { o.reconnected = reconnected }
}
