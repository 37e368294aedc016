package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/sharedrates"
	"github.com/kfn-dev/kfn/eventbridge/streamloss"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/internal/natsinflight"
)

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
	// EventPaths records each namespace's recent events' paths, served
	// on the admin API (Config.EventPaths; nil without the admin API or
	// the dispatcher): each replica records the events its publisher
	// stored and the deliveries its dispatcher made.
	EventPaths *eventpath.Namespaces
	// pathReplicas answers a path from every replica's EventPaths
	// (Config.EventPathsSubject).
	pathReplicas *eventpath.Replicas
	// DependencyCache is the dependency cache, served beside the
	// publisher (Config.DependencyCache, with Access.Senders).
	DependencyCache *depcache.Cache

	cfg  Config
	env  Environment
	opts options
	nc   *nats.Conn
	js   jetstream.JetStream
	log  *slog.Logger
	// lister lists the Subscriptions for the publisher (Environment.Serve).
	lister publisher.SubscriptionLister
	// gatewayReady is closed once the gateway knows the Functions
	// (EndpointSlices synced); nil: at once.
	gatewayReady <-chan struct{}
	// lossGuard tells when NATS lost a stream (package streamloss).
	lossGuard *streamloss.Guard
	// rates bound each namespace's events a second: its publishes and
	// its sinks' replies take from the same buckets.
	rates *admission.Rates
	// sharer makes rates one bound with the other replicas' (nil when
	// Config.RatesSubject is empty or neither publisher nor dispatcher
	// runs).
	sharer *sharedrates.Sharer
	// dependenciesOff says why the publisher's listener serves no
	// dependency cache, when it does not.
	dependenciesOff string
}

// New makes the parts of an event bridge that cfg asks for, on the NATS
// connection nc (on which kfn's streams exist; the host closes it after
// Run returned), in the world env says (a cluster or a static one), wired
// to each other: every host builds its event bridge here, so that a part,
// a limit, a listener's access rule or a route is added once. Nothing runs
// until Run. The error says which part could not be made.
func New(cfg Config, nc *nats.Conn, env Environment, opts ...Option) (*Bridge, error) {
	b, err := newBridge(cfg, nc, env, opts)
	if err != nil {
		return nil, err
	}
	for _, step := range []func() error{
		b.prepare,
		b.newDispatcher, // before Serve: the Subscriptions are served to it
		b.serveSubscriptions,
		b.newPublisher,
		b.newDependencyCache,
		b.newGateway,
		b.newDeadLetters,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// newBridge checks cfg and what New is given, and makes what every part
// shares: JetStream, the logger and the guard of lost streams.
func newBridge(cfg Config, nc *nats.Conn, env Environment, opts []Option) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, errors.New("event bridge: a NATS connection is required")
	}
	if env == nil {
		return nil, errors.New("event bridge: an Environment is required")
	}
	b := &Bridge{cfg: cfg, env: env, nc: nc}
	for _, o := range opts {
		o(&b.opts)
	}
	if b.opts.log == nil {
		b.opts.log = slog.New(slog.DiscardHandler)
	}
	b.log = logging.Component(b.opts.log, "eventbridge")
	var err error
	if b.js, err = jetstream.New(nc); err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if b.lossGuard, err = streamloss.New(b.js, append(cfg.Streams.PartitionStreams(), cfg.Streams.DeadLetterStream),
		streamloss.WithMetrics(b.opts.metrics), streamloss.WithLogger(b.component("streamloss")),
		streamloss.WithTakenAway(func(ctx context.Context, name string) (bool, error) {
			return jsstream.TakenAway(ctx, b.js, cfg.Streams, name)
		})); err != nil {
		return nil, err
	}
	if b.rates, err = publisher.SenderRates(cfg.Publisher); err != nil {
		return nil, err
	}
	if cfg.RatesSubject != "" && (cfg.Has(ComponentPublisher) || cfg.Has(ComponentDispatcher)) {
		if b.sharer, err = sharedrates.New(nc, b.rates, sharedrates.WithSubject(cfg.RatesSubject),
			sharedrates.WithLogger(b.component("rates")), sharedrates.WithMetrics(b.opts.metrics)); err != nil {
			return nil, fmt.Errorf("share rates: %w", err)
		}
	}
	return b, nil
}

// prepare readies the environment for the parts of the configuration.
func (b *Bridge) prepare() error { return b.env.Prepare(b.cfg, b.opts.metrics, b.opts.log) }

// serveSubscriptions serves the Subscriptions to the dispatcher (when it
// runs), and keeps the publisher's lister of them.
func (b *Bridge) serveSubscriptions() (err error) {
	b.lister, err = b.env.Serve(b.applier(), b.Dispatcher)
	return err
}

// newDeadLetters makes the dead-letter admin API (Config.Admin).
func (b *Bridge) newDeadLetters() (err error) {
	if !b.cfg.Admin {
		return nil
	}
	var opts []deadletter.AdminOption
	if b.opts.access.Admin != nil {
		opts = append(opts, deadletter.WithAccess(b.opts.access.Admin))
	}
	b.DeadLetters, err = deadletter.NewAdmin(b.js, b.cfg.Streams, opts...)
	return err
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
func (b *Bridge) component(name string) *slog.Logger { return logging.Component(b.opts.log, name) }

// newDispatcher makes the dispatcher (component dispatcher): its sinks
// found and its egress bounded as the environment says.
func (b *Bridge) newDispatcher() error {
	if !b.cfg.Has(ComponentDispatcher) {
		return nil
	}
	if b.cfg.Admin && b.cfg.EventPaths > 0 {
		var err error
		if b.EventPaths, err = eventpath.NewNamespaces(b.cfg.EventPaths, b.cfg.EventPathsNamespaces); err != nil {
			return err
		}
		if b.cfg.EventPathsSubject != "" {
			if b.pathReplicas, err = eventpath.NewReplicas(b.EventPaths, b.nc, b.cfg.EventPathsSubject, b.component("eventpaths")); err != nil {
				return err
			}
		}
	}
	cfg := b.cfg.Dispatcher
	cfg.Egress = b.env.Egress()
	cfg.Streams = b.cfg.Streams
	// Replies are held to the publisher's reservations (package admission).
	cfg.Reserved, cfg.LegacyPrefix = b.cfg.Publisher.Reserved, b.cfg.Publisher.LegacyPrefix
	if cfg.Jitter == 0 {
		cfg.Jitter = -1 // none; the dispatcher reads 0 as its default
	}
	d, err := dispatcher.New(b.js, cfg, b.dispatcherOptions(cfg)...)
	if err != nil {
		return err
	}
	if b.opts.metrics != nil {
		if err := b.opts.metrics.Register(d.Collector()); err != nil {
			return fmt.Errorf("register the backlog metrics: %w", err)
		}
	}
	b.Dispatcher = d
	return nil
}

// dispatcherOptions are the dispatcher's options: the sinks as the
// environment finds them, and what the host added.
func (b *Bridge) dispatcherOptions(cfg dispatcher.Config) []dispatcher.Option {
	opts := []dispatcher.Option{dispatcher.WithLogger(b.component("dispatcher"))}
	if b.opts.access.Senders != nil {
		// Publishes have their namespace's rate only when senders are
		// known; replies always name theirs, and then share it.
		opts = append(opts, dispatcher.WithReplyRates(b.rates))
	}
	if b.opts.metrics != nil {
		opts = append(opts, dispatcher.WithMetrics(b.opts.metrics))
	}
	if b.opts.tracer != nil {
		opts = append(opts, dispatcher.WithTracerProvider(b.opts.tracer))
	}
	if b.opts.observer != nil {
		opts = append(opts, dispatcher.WithObserver(b.opts.observer))
	}
	if b.EventPaths != nil {
		opts = append(opts, dispatcher.WithObserver(b.EventPaths))
	}
	endpoints, resolver := b.env.Sinks()
	if endpoints != nil {
		opts = append(opts, dispatcher.WithEndpoints(endpoints))
	}
	opts = append(opts, dispatcher.WithResolver(resolver))
	if b.opts.transport != nil {
		opts = append(opts, dispatcher.WithTransport(b.opts.transport(dispatcher.NewTransport(cfg.Egress))))
	}
	return opts
}

// newPublisher makes the publisher (component publisher), listing the
// Subscriptions the environment serves on its subscribed endpoint.
func (b *Bridge) newPublisher() error {
	if !b.cfg.Has(ComponentPublisher) {
		return nil
	}
	nc := b.nc
	opts := []publisher.Option{
		publisher.WithLogger(b.component("publisher")),
		publisher.WithSubscriptions(b.lister),
		publisher.WithReady(func(context.Context) error {
			if !nc.IsConnected() {
				return fmt.Errorf("not connected to NATS (%s)", nc.Status())
			}
			return nil
		}),
		publisher.WithLive(func(context.Context) error { return natsconn.Live(nc) }),
		publisher.WithRates(b.rates),
	}
	if b.opts.metrics != nil {
		opts = append(opts, publisher.WithMetrics(b.opts.metrics))
	}
	if b.opts.tracer != nil {
		opts = append(opts, publisher.WithTracerProvider(b.opts.tracer))
	}
	apps, err := b.env.Applications()
	if err != nil {
		return err
	}
	if apps != nil {
		opts = append(opts, publisher.WithApplications(apps))
	}
	var store publisher.EventStore = eventstore.ForEventStream(b.js, b.cfg.Streams)
	if b.EventPaths != nil {
		// Each event stored is recorded in its sender's namespace (no
		// consumer of the stream for it); one published without trace
		// context starts a trace, which the runtime hosts pass on to the
		// events its handlers emit: the paths group them in one chain.
		store = eventpath.TraceRoots(b.EventPaths.Store(store))
	}
	if b.opts.store != nil {
		store = b.opts.store(store)
	}
	if b.opts.access.Senders != nil {
		opts = append(opts, publisher.WithSenders(b.opts.access.Senders))
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

// newDependencyCache makes the dependency cache beside the publisher, or
// says why there is none: it needs the callers' namespaces
// (Access.Senders).
func (b *Bridge) newDependencyCache() error {
	if !b.cfg.Has(ComponentPublisher) {
		return nil
	}
	switch {
	case !b.cfg.DependencyCache:
		b.dependenciesOff = "turned off (-dependency-cache=false)"
	case b.opts.access.Senders == nil || b.opts.access.DependencyWriters == nil:
		b.dependenciesOff = "the event bridge cannot tell a caller's namespace (-publisher-senders=none, or no Kubernetes)"
	}
	if b.dependenciesOff != "" {
		b.log.Info("no dependency cache: Function pods install their dependencies themselves", "reason", b.dependenciesOff)
		return nil
	}
	opts := []depcache.Option{depcache.WithLogger(b.component("depcache"))}
	if b.opts.metrics != nil {
		opts = append(opts, depcache.WithMetrics(b.opts.metrics))
	}
	cache, err := depcache.New(b.js, jsstream.DependencyBucketConfig(b.cfg.Streams), b.opts.access.Senders, b.opts.access.DependencyWriters,
		b.cfg.DependencyCacheBounds, opts...)
	if err != nil {
		return fmt.Errorf("dependency cache: %w", err)
	}
	b.DependencyCache = cache
	return nil
}

// newGateway makes the gateway (component gateway): Functions known and
// ready as the environment says, in-flight counts reported as
// WithInFlight says or over NATS.
func (b *Bridge) newGateway() error {
	if !b.cfg.Has(ComponentGateway) {
		return nil
	}
	log := b.component("gateway")
	backends, ready, err := b.env.Functions()
	if err != nil {
		return err
	}
	b.gatewayReady = ready
	reporter, err := b.inFlightReporter(log)
	if err != nil {
		return err
	}
	cfg := b.cfg.Gateway
	cfg.Egress = b.env.Egress()
	if cfg.Source == "" {
		cfg.Source = "eventbridge/" + hostname()
	}
	opts := []gateway.Option{gateway.WithInFlightReporter(reporter), gateway.WithLogger(log)}
	if b.opts.metrics != nil {
		opts = append(opts, gateway.WithMetrics(b.opts.metrics))
	}
	if b.opts.access.Gateway != nil {
		opts = append(opts, gateway.WithAccess(b.opts.access.Gateway))
	}
	gw, err := gateway.New(backends, cfg, opts...)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	b.Gateway = gw
	if s, ok := b.env.(APIRuleServer); ok && b.cfg.ServeAPIRules {
		if p := b.cfg.APIRoutes; p != nil {
			reserved := cfg.HostSuffixes
			if reserved == nil {
				reserved = gateway.DefaultHostSuffixes
			}
			err = s.RouteAPIRules(httproute.Config{Parent: *p, Domain: cfg.APIRuleDomain, Reserved: reserved})
		} else {
			err = s.ServeAPIRules(gw)
		}
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	return nil
}

// inFlightReporter is where the gateway reports its in-flight counts:
// WithInFlight's reporter, or else Config.GatewayInFlightSubject for the
// scalers.
func (b *Bridge) inFlightReporter(log *slog.Logger) (gateway.InFlightReporter, error) {
	if b.opts.inFlight != nil {
		return b.opts.inFlight, nil
	}
	opts := []natsinflight.Option{natsinflight.WithLogger(log)}
	if b.cfg.GatewayInFlightSubject != "" {
		opts = append(opts, natsinflight.WithSubject(b.cfg.GatewayInFlightSubject))
	}
	pub, err := natsinflight.NewPublisher(b.nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return pub, nil
}
