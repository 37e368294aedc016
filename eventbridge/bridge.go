package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/streamloss"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/internal/natsinflight"
)

// Deps are what the host of an event bridge gives it: the NATS connection
// it keeps events on, where its logs, metrics and spans go, and where its
// Subscriptions and sinks are. The hosts are Run (the event bridge as a
// process of its own, in a cluster), kfn dev (package local/dev) and the
// benchmarks (bench/eventbridge).
type Deps struct {
	// Conn is the NATS connection, on which kfn's streams exist (required).
	// The host closes it after Run returned.
	Conn *nats.Conn
	// Log is the root logger (package logging): each part logs under its
	// component name. Nil discards.
	Log *slog.Logger
	// Metrics registers every part's metrics; nil: none.
	Metrics prometheus.Registerer
	// Tracer makes the publisher's and the dispatcher's spans; nil: none.
	Tracer trace.TracerProvider
	// Token, when set, is the bearer token the publisher's handler
	// requires, and the gateway's without GatewayAccess (auth.RequireToken:
	// in auth.TokenHeader beside a sender's identity, which Senders then
	// checks too, or as the bearer token).
	Token []byte
	// Access, when set, authenticates the callers of the dead-letter
	// admin API as Kubernetes does and lets each do only what RBAC grants
	// them on the dead letters of a namespace (deadletter.Resource); Run
	// follows the cluster's client CA for it. Nil: whoever reaches the
	// admin API's listener may use it (kfn dev, on the user's own
	// loopback).
	Access *auth.Kubernetes
	// GatewayAccess, when set, authenticates the gateway's callers as
	// Kubernetes does and lets each call only the Functions RBAC grants
	// them gateway.Invoke on (functions/invoke in the Function's
	// namespace); the bearer token or client certificate it took is not
	// passed on to the Function. It may be Access itself. Nil: Token, when
	// set, guards the gateway.
	GatewayAccess *auth.Kubernetes
	// Senders, when set, tells the publisher which namespace sends each
	// event from the ServiceAccount token it carries (a Function's host
	// sends its pod's), which it records as the extension
	// publisher.SenderExtension; a token the cluster does not know is
	// refused (401). It may be Access itself. The dependency cache
	// (Config.DependencyCache) learns its callers' namespaces from it, and
	// is off without it.
	Senders *auth.Kubernetes
	// DependencyWriters tells the dependency cache which upload is the
	// install step of a pod of the object's own dependency set (its writer
	// token); the cache is off without it, as without Senders.
	DependencyWriters depcache.Writers

	// Kubernetes, when set, is the manager the bridge reads Subscriptions,
	// EndpointSlices and Kyma's Applications with and runs its reconciler
	// in; Run starts it. Without it, the Subscriptions are those the host
	// gives Bridge.Subscriptions, and the sinks are found by Endpoints,
	// Resolver and Backends.
	Kubernetes ctrl.Manager
	// Endpoints, without Kubernetes, tells whether a sink is ready; nil:
	// always.
	Endpoints dispatcher.Endpoints
	// Resolver, without Kubernetes, maps sinks to URLs; nil: Config.Resolve,
	// else as written.
	Resolver dispatcher.Resolver
	// Backends, without Kubernetes, are where the gateway's Functions run
	// (required for the gateway then).
	Backends gateway.Backends
	// Targets, without Kubernetes, are told the Subscriptions too, beside
	// the dispatcher (kfn dev's scaler).
	Targets []feed.Targets
	// InFlight receives the gateway's in-flight counts; nil: published on
	// Config.GatewayInFlightSubject for the scalers (package inflight).
	InFlight gateway.InFlightReporter

	// Observer, when set, is told every delivery step (kfn dev's path of
	// recent events).
	Observer dispatcher.Observer
	// Transport, when set, wraps the transport deliveries go through.
	Transport func(http.RoundTripper) http.RoundTripper
	// Store, when set, wraps the event store the publisher writes to.
	Store func(publisher.EventStore) publisher.EventStore
	// Reconnected, when set, receives after each reconnect of Conn (NATS
	// may be a new, empty server then): Run makes the streams and the
	// consumers again.
	Reconnected <-chan struct{}
}

// Bridge is an event bridge's parts, made by New and run by Run. The parts
// of the components Config leaves out are nil.
type Bridge struct {
	// Publisher is the publishing API (component publisher).
	Publisher *publisher.Publisher
	// Dispatcher delivers events to the Subscriptions' sinks (component
	// dispatcher).
	Dispatcher *dispatcher.Dispatcher
	// Gateway is the synchronous HTTP gateway to Functions (component
	// gateway).
	Gateway *gateway.Gateway
	// DeadLetters is the dead-letter admin API (Config.Admin).
	DeadLetters *deadletter.Admin
	// Subscriptions, without Kubernetes, serves the Subscriptions the host
	// applies to it: their consumers, the dispatcher and Deps.Targets.
	Subscriptions *subscription.Set
	// DependencyCache is the dependency cache, served beside the
	// publisher (Config.DependencyCache, with Deps.Senders).
	DependencyCache *depcache.Cache

	cfg  Config
	deps Deps
	js   jetstream.JetStream
	log  *slog.Logger
	// reconciler is the Subscription reconciler, in a cluster.
	reconciler *subscription.Reconciler
	// gatewayReady is closed once the gateway knows the Functions
	// (EndpointSlices synced); nil: at once.
	gatewayReady <-chan struct{}
	// lossGuard tells when NATS lost a stream (package streamloss).
	lossGuard *streamloss.Guard
	// opener opens an event stream made anew once every Subscription's
	// consumer exists in it; nil when this bridge makes no consumers
	// (no reconciler), which makes a missing event stream open.
	opener *subscription.Opener
	// dependenciesOff says why the publisher's listener serves no
	// dependency cache, when it does not.
	dependenciesOff string
}

// New makes the parts of an event bridge that cfg asks for, wired to each
// other and to what deps gives: every host builds its event bridge here,
// so that a part, a limit, a listener's access rule or a route is added
// once. Nothing runs until Run. The error says which part could not be made.
func New(cfg Config, deps Deps) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Conn == nil {
		return nil, errors.New("event bridge: Deps.Conn is required")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(deps.Conn)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	b := &Bridge{cfg: cfg, deps: deps, js: js, log: logging.Component(deps.Log, "eventbridge")}
	if b.lossGuard, err = streamloss.New(js, []string{cfg.Streams.EventStream, cfg.Streams.DeadLetterStream},
		streamloss.WithMetrics(deps.Metrics), streamloss.WithLogger(b.component("streamloss"))); err != nil {
		return nil, err
	}
	var c *cluster
	if deps.Kubernetes != nil {
		if c, err = b.newCluster(); err != nil {
			return nil, err
		}
	}
	if cfg.Has(ComponentDispatcher) {
		if err := b.newDispatcher(c); err != nil {
			return nil, err
		}
	}
	var lister publisher.SubscriptionLister
	if c != nil {
		if lister, err = c.serveSubscriptions(); err != nil {
			return nil, err
		}
	} else {
		targets := deps.Targets
		if b.Dispatcher != nil {
			targets = append([]feed.Targets{b.Dispatcher}, targets...)
		}
		b.Subscriptions = subscription.NewSet(b.applier(), targets...)
		lister = b.Subscriptions
		log := b.log
		b.opener = subscription.NewOpener(b.applier(), func(ctx context.Context) []error {
			return b.Subscriptions.MakeConsumers(ctx, log)
		}, log)
		if deps.Metrics != nil {
			if err := b.opener.WithMetrics(deps.Metrics); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Has(ComponentPublisher) {
		if err := b.newPublisher(c, lister); err != nil {
			return nil, err
		}
	}
	if cfg.Has(ComponentPublisher) {
		if err := b.newDependencyCache(); err != nil {
			return nil, err
		}
	}
	if cfg.Has(ComponentGateway) {
		if err := b.newGateway(c); err != nil {
			return nil, err
		}
	}
	if cfg.Admin {
		var opts []deadletter.AdminOption
		if deps.Access != nil {
			opts = append(opts, deadletter.WithAccess(deps.Access))
		}
		if b.DeadLetters, err = deadletter.NewAdmin(js, cfg.Streams, opts...); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// applier applies Subscriptions to JetStream with the configured consumer
// settings (the same delivery defaults as the dispatcher's) and a
// namespace's limits.
func (b *Bridge) applier() subscription.Applier {
	return subscription.Applier{JetStream: b.js, Streams: b.cfg.Streams,
		Consumer: stream.ConsumerSettings{AckWait: b.cfg.AckWait, Defaults: b.cfg.Dispatcher.Delivery},
		Limits:   b.cfg.SubscriptionLimits}
}

// component returns the logger of a part.
func (b *Bridge) component(name string) *slog.Logger { return logging.Component(b.deps.Log, name) }

// newDispatcher makes the dispatcher.
func (b *Bridge) newDispatcher(c *cluster) error {
	cfg := b.cfg.Dispatcher
	cfg.Streams = b.cfg.Streams
	// Replies are held to the publisher's reservations (package admission).
	cfg.Reserved, cfg.LegacyPrefix = b.cfg.Publisher.Reserved, b.cfg.Publisher.LegacyPrefix
	if cfg.Jitter == 0 {
		cfg.Jitter = -1 // none; the dispatcher reads 0 as its default
	}
	opts := []dispatcher.Option{dispatcher.WithLogger(b.component("dispatcher"))}
	if b.deps.Metrics != nil {
		opts = append(opts, dispatcher.WithMetrics(b.deps.Metrics))
	}
	if b.deps.Tracer != nil {
		opts = append(opts, dispatcher.WithTracerProvider(b.deps.Tracer))
	}
	if b.deps.Observer != nil {
		opts = append(opts, dispatcher.WithObserver(b.deps.Observer))
	}
	endpoints, resolver := b.deps.Endpoints, b.deps.Resolver
	if resolver == nil {
		resolver = StaticResolver(b.cfg.Resolve)
	}
	if c != nil {
		endpoints, resolver = c.endpoints, ClusterResolver(c.endpoints, b.cfg.Resolve)
		cfg.Egress = c.egress()
	}
	if endpoints != nil {
		opts = append(opts, dispatcher.WithEndpoints(endpoints))
	}
	opts = append(opts, dispatcher.WithResolver(resolver))
	if b.deps.Transport != nil {
		opts = append(opts, dispatcher.WithTransport(b.deps.Transport(dispatcher.NewTransport(cfg.Egress))))
	}
	d, err := dispatcher.New(b.js, cfg, opts...)
	if err != nil {
		return err
	}
	if b.deps.Metrics != nil {
		if err := b.deps.Metrics.Register(d.Collector()); err != nil {
			return fmt.Errorf("register the backlog metrics: %w", err)
		}
	}
	b.Dispatcher = d
	return nil
}

// newPublisher makes the publisher; lister lists the Subscriptions for its
// subscribed endpoint.
func (b *Bridge) newPublisher(c *cluster, lister publisher.SubscriptionLister) error {
	log := b.component("publisher")
	nc := b.deps.Conn
	opts := []publisher.Option{
		publisher.WithLogger(log),
		publisher.WithSubscriptions(lister),
		publisher.WithReady(func(context.Context) error {
			if !nc.IsConnected() {
				return fmt.Errorf("not connected to NATS (%s)", nc.Status())
			}
			return nil
		}),
		publisher.WithLive(func(context.Context) error { return natsconn.Live(nc) }),
	}
	if b.deps.Metrics != nil {
		opts = append(opts, publisher.WithMetrics(b.deps.Metrics))
	}
	if b.deps.Tracer != nil {
		opts = append(opts, publisher.WithTracerProvider(b.deps.Tracer))
	}
	if c != nil && b.cfg.KymaApplications {
		apps, err := c.applications(log)
		if err != nil {
			return err
		}
		opts = append(opts, publisher.WithApplications(apps))
	}
	var store publisher.EventStore = eventstore.New(b.js, b.cfg.Streams.EventStream)
	if b.deps.Store != nil {
		store = b.deps.Store(store)
	}
	if b.deps.Senders != nil {
		opts = append(opts, publisher.WithSenders(b.deps.Senders))
	}
	cfg := b.cfg.Publisher
	cfg.MaxHops = b.cfg.Dispatcher.MaxHops // one hop limit for replies and emitted events
	p, err := publisher.New(store, cfg, opts...)
	if err != nil {
		return err
	}
	b.Publisher = p
	return nil
}

// newDependencyCache makes the dependency cache, or says why there is
// none: it needs the callers' namespaces (Deps.Senders).
func (b *Bridge) newDependencyCache() error {
	switch {
	case !b.cfg.DependencyCache:
		b.dependenciesOff = "turned off (-dependency-cache=false)"
	case b.deps.Senders == nil || b.deps.DependencyWriters == nil:
		b.dependenciesOff = "the event bridge cannot tell a caller's namespace (-publisher-senders=none, or no Kubernetes)"
	}
	if b.dependenciesOff != "" {
		b.log.Info("no dependency cache: Function pods install their dependencies themselves", "reason", b.dependenciesOff)
		return nil
	}
	opts := []depcache.Option{depcache.WithLogger(b.component("depcache"))}
	if b.deps.Metrics != nil {
		opts = append(opts, depcache.WithMetrics(b.deps.Metrics))
	}
	cache, err := depcache.New(b.js, jsstream.DependencyBucketConfig(b.cfg.Streams), b.deps.Senders, b.deps.DependencyWriters, b.cfg.DependencyCacheBounds, opts...)
	if err != nil {
		return fmt.Errorf("dependency cache: %w", err)
	}
	b.DependencyCache = cache
	return nil
}

// newGateway makes the gateway: Functions known and ready from the
// cluster's EndpointSlices or Deps.Backends, in-flight counts reported to
// Deps.InFlight or over NATS.
func (b *Bridge) newGateway(c *cluster) error {
	log := b.component("gateway")
	backends := b.deps.Backends
	if c != nil {
		backends = ClusterBackends{Endpoints: c.endpoints, Resolve: b.cfg.Resolve}
		b.gatewayReady = c.endpoints.Synced()
	}
	if backends == nil {
		return errors.New("gateway: no backends: it needs Kubernetes (EndpointSlices) or Deps.Backends")
	}
	reporter := b.deps.InFlight
	if reporter == nil {
		opts := []natsinflight.Option{natsinflight.WithLogger(log)}
		if b.cfg.GatewayInFlightSubject != "" {
			opts = append(opts, natsinflight.WithSubject(b.cfg.GatewayInFlightSubject))
		}
		pub, err := natsinflight.NewPublisher(b.deps.Conn, opts...)
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		reporter = pub
	}
	cfg := b.cfg.Gateway
	cfg.Egress = b.cfg.Dispatcher.Egress
	if c != nil {
		cfg.Egress = c.egress()
	}
	if cfg.Source == "" {
		cfg.Source = "eventbridge/" + hostname()
	}
	opts := []gateway.Option{gateway.WithInFlightReporter(reporter), gateway.WithLogger(log)}
	if b.deps.Metrics != nil {
		opts = append(opts, gateway.WithMetrics(b.deps.Metrics))
	}
	if b.deps.GatewayAccess != nil {
		opts = append(opts, gateway.WithAccess(b.deps.GatewayAccess))
	}
	gw, err := gateway.New(backends, cfg, opts...)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	b.Gateway = gw
	return nil
}

// Handlers are the event bridge's HTTP handlers, with the access rules of
// their listeners; a host serves each on a listener of its own (Run) or
// mounts them on one (kfn dev). A handler is nil when its part does not
// run.
type Handlers struct {
	// Publisher serves publisher.Routes, and the dependency cache's
	// routes under depcache.PathPrefix (404 when it is off), which
	// authenticate their callers by their ServiceAccount tokens, whether
	// or not Deps.Token is set.
	Publisher http.Handler
	// Gateway serves requests to Functions; until it knows the Functions
	// (the cluster's EndpointSlices synced), it holds them.
	Gateway http.Handler
	// DeadLetters serves the dead-letter admin API (also under
	// deadletter.PathPrefix); with Deps.Access, to the callers Kubernetes
	// authenticates, each as far as RBAC lets them.
	DeadLetters http.Handler
}

// Handlers returns the parts' handlers. The publisher's and the gateway's
// require Deps.Token when set, but for their health checks.
func (b *Bridge) Handlers() Handlers {
	var h Handlers
	if b.Publisher != nil {
		var dependencies http.Handler = b.DependencyCache
		if b.DependencyCache == nil {
			dependencies = depcache.Off(b.dependenciesOff)
		}
		h.Publisher = withDependencies(dependencies, auth.RequireToken(b.deps.Token, b.Publisher, "/healthz", "/readyz"))
	}
	if b.Gateway != nil {
		h.Gateway = waitFor(b.gatewayReady, b.Gateway)
		if b.deps.GatewayAccess != nil {
			h.Gateway = b.deps.GatewayAccess.Authenticate(h.Gateway, "/healthz", "/readyz")
		} else {
			h.Gateway = auth.RequireToken(b.deps.Token, h.Gateway, "/healthz", "/readyz")
		}
	}
	if b.DeadLetters != nil {
		h.DeadLetters = b.DeadLetters.Handler()
		if b.deps.Access != nil {
			h.DeadLetters = b.deps.Access.Authenticate(h.DeadLetters)
		}
	}
	return h
}

// withDependencies serves the paths under depcache.PathPrefix with
// dependencies, the others with h. The path is matched as sent, not
// cleaned (a ServeMux would redirect a path with "..": the cache refuses
// it).
func withDependencies(dependencies, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, depcache.PathPrefix) || strings.HasPrefix(r.URL.EscapedPath(), depcache.PathPrefix) {
			dependencies.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// waitFor holds each request to h until ready is closed, or its client
// leaves. A nil ready serves at once.
func waitFor(ready <-chan struct{}, h http.Handler) http.Handler {
	if ready == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ready:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// Run runs the parts until ctx ends, then stops them and returns nil: the
// dispatcher settles or gives back the events it holds (within its
// ShutdownGrace), the Kubernetes manager stops. The handlers are the
// host's to stop, after Run returns or later (kfn dev serves its
// publisher until its functions drained). Run ends early with an error
// when a part fails, or when the NATS connection closes for good (it wraps
// natsconn.ErrLost: nothing on the connection would work again; the host
// starts anew on a new one).
func (b *Bridge) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	switch {
	case b.deps.Kubernetes != nil:
		// The manager runs the reconciler, the feeder, the EndpointSlice
		// watcher and the dispatcher (package cluster.go).
		g.Go(func() error { return b.deps.Kubernetes.Start(ctx) })
	case b.Dispatcher != nil:
		g.Go(func() error { return b.Dispatcher.Start(ctx) })
	}
	if b.Gateway != nil {
		g.Go(func() error { return b.Gateway.Run(ctx) })
	}
	// Replays are made by the admin API; consumers made by a release
	// that always filtered on the replay subject lose it too.
	if b.DeadLetters != nil || b.Subscriptions != nil || b.reconciler != nil {
		g.Go(func() error { return b.applier().SweepReplays(ctx, b.cfg.ReplaySweep, b.component("replay")) })
	}
	// In a cluster, the reconciler's leader runs the opener (cluster.go).
	if b.Subscriptions != nil {
		g.Go(func() error { return b.opener.Run(ctx) })
	}
	// The dependency cache's bucket is made now, not at the first
	// pod's request.
	if b.DependencyCache != nil {
		g.Go(func() error { b.DependencyCache.Run(ctx, 2*time.Second); return nil })
	}
	// A stream NATS lost is reported, not only made anew (package
	// streamloss): looked at every resync and before each re-creation.
	g.Go(func() error { b.lossGuard.Run(ctx, b.cfg.Resync); return nil })
	if b.deps.Reconnected != nil {
		g.Go(func() error { b.followNATS(ctx); return nil })
	}
	var running []*auth.Kubernetes
	for _, a := range []*auth.Kubernetes{b.deps.Access, b.deps.GatewayAccess, b.deps.Senders} {
		if a != nil && !slices.Contains(running, a) {
			running = append(running, a)
			g.Go(func() error { return a.Run(ctx) })
		}
	}
	lost := natsconn.Lost(ctx, b.deps.Conn)
	g.Go(func() error {
		select {
		case err := <-lost:
			return err
		case <-ctx.Done():
			return nil
		}
	})
	return g.Wait()
}

// followNATS recreates, after each reconnect (NATS may be a new, empty
// server), the streams first, then every consumer; a stream that was lost
// is reported first. An event stream made anew is closed until the opener
// (in this replica or the reconciler's leader) made every consumer in it.
func (b *Bridge) followNATS(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.deps.Reconnected:
		}
		if _, err := b.lossGuard.Check(ctx); err != nil {
			b.log.Warn("looking for lost streams after a reconnect failed; the next resync looks again", "error", err)
		}
		if err := ensureStreams(ctx, b.js, b.cfg.Streams, b.opener != nil, b.log); err != nil {
			b.log.Error("recreating streams after a reconnect failed; the next resync retries", "error", err)
			continue
		}
		if b.opener != nil {
			b.opener.Wake()
		}
		if b.reconciler != nil {
			if err := b.reconciler.RequeueAll(ctx); err != nil {
				b.log.Error("requeueing subscriptions after a reconnect failed; the next resync retries", "error", err)
			}
		}
		if b.Subscriptions != nil {
			for _, err := range b.Subscriptions.Reapply(ctx) {
				b.log.Error("recreating a consumer after a reconnect failed", "error", err)
			}
		}
	}
}

// EnsureStreams makes kfn's streams exist as c says, retrying with backoff
// until it works or ctx ends; a configuration NATS refuses is an error at
// once (stream.ErrInvalidConfig). A missing event stream is made open; a
// closed one stays closed (see stream.ClosedSubjectPrefix).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, c stream.Config, log *slog.Logger) error {
	return ensureStreams(ctx, js, c, false, log)
}

// ensureStreams is EnsureStreams; with closed, a missing event stream is
// made closed (stream.EnsureClosed), for an Opener to open.
func ensureStreams(ctx context.Context, js jetstream.JetStream, c stream.Config, closed bool, log *slog.Logger) error {
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 5*time.Second) {
		var err error
		if closed {
			_, err = jsstream.EnsureClosed(ctx, js, c)
		} else {
			err = jsstream.Ensure(ctx, js, c)
		}
		if err == nil || errors.Is(err, stream.ErrInvalidConfig) {
			return err
		}
		log.Warn("creating streams failed, retrying", "error", err, "retryIn", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("create streams: %w", err)
		case <-time.After(wait):
		}
	}
}
