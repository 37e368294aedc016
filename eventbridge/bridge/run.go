package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/eventbridge/auth"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/stream"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
	"github.com/kfn-dev/kfn/internal/logging"
)

// Timeouts of the HTTP servers, bounding slow clients.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 10 * time.Second
)

// Run runs the configured components until ctx is done, then shuts them
// down gracefully and returns nil; an error means a component could not
// start or failed. root is the logger without a component (package
// logging): each component logs with its own name, and lines about the
// process as a whole with "eventbridge".
func Run(ctx context.Context, cfg Config, root *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := logging.Component(root, "eventbridge")
	if cfg.Dispatcher.Jitter == 0 {
		cfg.Dispatcher.Jitter = -1 // 0 means none here; the dispatcher reads 0 as its default
	}
	cfg.Dispatcher.Streams = cfg.Streams

	reconnected := make(chan struct{}, 1)
	var token []byte
	if cfg.TokenFile != "" {
		t, err := auth.ReadToken(cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("-token-file: %w", err)
		}
		token = t
	}
	nc, err := nats.Connect(cfg.NATSURL,
		nats.Name("kfn-eventbridge"),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("disconnected from NATS", "error", err) }),
		nats.ReconnectHandler(func(*nats.Conn) {
			log.Info("reconnected to NATS")
			select {
			case reconnected <- struct{}{}:
			default:
			}
		}),
	)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", cfg.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if err := ensureStreams(ctx, js, cfg.Streams, log); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	traces, err := otlp.Start(ctx, otlp.Config{Endpoint: cfg.TraceEndpoint})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := traces.Shutdown(sctx); err != nil {
			log.Warn("exporting the last spans failed", "error", err)
		}
	}()
	if traces.Enabled {
		log.Info("tracing", "endpoint", cfg.TraceEndpoint)
	}

	g, ctx := errgroup.WithContext(ctx)
	var servers []*http.Server
	// serveWhen listens on addr now and serves h once ready is closed (nil:
	// at once).
	serveWhen := func(name, addr string, h http.Handler, ready <-chan struct{}) {
		srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
		servers = append(servers, srv)
		g.Go(func() error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("%s: listen on %s: %w", name, addr, err)
			}
			if ready != nil {
				select {
				case <-ready:
				case <-ctx.Done():
					_ = ln.Close()
					return nil
				}
			}
			log.Info("serving", "server", name, "address", ln.Addr().String())
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	serve := func(name, addr string, h http.Handler) { serveWhen(name, addr, h, nil) }

	// Kubernetes, unless Subscriptions come from files.
	var mgr ctrl.Manager
	var rec *subscription.Reconciler
	static := len(cfg.Subscriptions) > 0
	if !static && (cfg.Has(ComponentReconciler) || cfg.Has(ComponentDispatcher) || cfg.Has(ComponentPublisher) || cfg.Has(ComponentGateway)) {
		if mgr, err = newManager(cfg, log); err != nil {
			return err
		}
	}

	// One EndpointSlice watcher for the dispatcher and the gateway.
	var eps *endpoints.Watcher
	if mgr != nil && (cfg.Has(ComponentDispatcher) || cfg.Has(ComponentGateway)) {
		eps = endpoints.New()
		if err := mgr.Add(runnableFunc(func(ctx context.Context) error { return eps.Start(ctx, mgr.GetCache()) })); err != nil {
			return fmt.Errorf("add endpoints watcher: %w", err)
		}
	}

	var subsLister publisher.SubscriptionLister
	var staticSubs []*v1alpha2.Subscription
	if static {
		if staticSubs, err = loadSubscriptions(ctx, cfg.Subscriptions); err != nil {
			return err
		}
		subsLister = staticLister(staticSubs)
	} else if mgr != nil {
		subsLister = subscription.Lister{Client: mgr.GetClient()}
	}

	if cfg.Has(ComponentPublisher) {
		pm, err := publisher.NewMetrics(reg)
		if err != nil {
			return err
		}
		opts := []publisher.Option{
			publisher.WithLogger(logging.Component(root, "publisher")),
			publisher.WithMetrics(pm),
			publisher.WithReady(func(context.Context) error {
				if !nc.IsConnected() {
					return fmt.Errorf("not connected to NATS (%s)", nc.Status())
				}
				return nil
			}),
		}
		if subsLister != nil {
			opts = append(opts, publisher.WithSubscriptions(subsLister))
		}
		if traces.Enabled {
			opts = append(opts, publisher.WithTracerProvider(traces))
		}
		if mgr != nil && cfg.KymaApplications {
			disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
			if err != nil {
				return fmt.Errorf("discovery client: %w", err)
			}
			apps := applications.New(disc, cfg.ApplicationCheckInterval, logging.Component(root, "publisher"))
			if err := mgr.Add(runnableFunc(func(ctx context.Context) error { return apps.Start(ctx, mgr.GetCache()) })); err != nil {
				return fmt.Errorf("add application watcher: %w", err)
			}
			opts = append(opts, publisher.WithApplications(apps))
		}
		p, err := publisher.New(eventstore.New(js, cfg.Streams.EventStream), cfg.Publisher, opts...)
		if err != nil {
			return err
		}
		serve("publisher", cfg.Listen, auth.RequireToken(token, p, "/healthz", "/readyz"))
	}

	if cfg.Has(ComponentDispatcher) {
		dm, err := dispatcher.NewMetrics(reg)
		if err != nil {
			return err
		}
		opts := []dispatcher.Option{
			dispatcher.WithLogger(logging.Component(root, "dispatcher")),
			dispatcher.WithMetrics(dm),
			dispatcher.WithResolver(ClusterResolver(eps, cfg.Resolve)),
		}
		if eps != nil {
			opts = append(opts, dispatcher.WithEndpoints(eps))
		}
		if traces.Enabled {
			opts = append(opts, dispatcher.WithTracerProvider(traces))
		}
		d, err := dispatcher.New(js, cfg.Dispatcher, opts...)
		if err != nil {
			return err
		}
		if err := reg.Register(d.Collector()); err != nil {
			return fmt.Errorf("register the backlog metrics: %w", err)
		}
		if static {
			for _, s := range staticSubs {
				if err := ensureConsumer(ctx, js, cfg, s); err != nil {
					return err
				}
				if err := d.Upsert(s); err != nil {
					return fmt.Errorf("subscription %s/%s: %w", s.Namespace, s.Name, err)
				}
			}
			g.Go(func() error { return d.Start(ctx) })
		} else {
			if err := (&subscription.Feeder{Client: mgr.GetClient(), Targets: d}).SetupWithManager(mgr); err != nil {
				return fmt.Errorf("set up dispatcher feeder: %w", err)
			}
			if err := mgr.Add(runnableFunc(d.Start)); err != nil {
				return err
			}
		}
	}

	if cfg.Has(ComponentReconciler) && mgr != nil {
		rec = &subscription.Reconciler{Client: mgr.GetClient(), JetStream: js, Streams: cfg.Streams,
			Consumer: stream.ConsumerSettings{AckWait: cfg.AckWait, Defaults: cfg.Dispatcher.Delivery}, Resync: cfg.Resync}
		if err := rec.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up subscription reconciler: %w", err)
		}
	}

	if cfg.Has(ComponentGateway) {
		gw, err := newGateway(cfg, nc, eps, reg, logging.Component(root, "gateway"))
		if err != nil {
			return err
		}
		g.Go(func() error { gw.Run(ctx.Done()); return nil })
		// Until the EndpointSlices are in, every Function would be unknown.
		serveWhen("gateway", cfg.GatewayListen, auth.RequireToken(token, gw, "/healthz", "/readyz"), eps.Synced())
	}

	if cfg.AdminListen != "" {
		admin, err := deadletter.NewAdmin(js, cfg.Streams)
		if err != nil {
			return err
		}
		serve("admin", cfg.AdminListen, admin.Handler())
	}
	if cfg.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		serve("metrics", cfg.MetricsListen, mux)
	}
	if mgr != nil {
		g.Go(func() error { return mgr.Start(ctx) })
	}

	// After a reconnect NATS may be a new, empty server: streams first,
	// then every consumer.
	g.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-reconnected:
			}
			if err := ensureStreams(ctx, js, cfg.Streams, log); err != nil {
				log.Error("recreating streams after a reconnect failed; the next resync retries", "error", err)
				continue
			}
			if rec != nil {
				if err := rec.RequeueAll(ctx); err != nil {
					log.Error("requeueing subscriptions after a reconnect failed; the next resync retries", "error", err)
				}
			}
			if static {
				for _, s := range staticSubs {
					if err := ensureConsumer(ctx, js, cfg, s); err != nil {
						log.Error("recreating a consumer after a reconnect failed", "namespace", s.Namespace, "subscription", s.Name, "error", err)
					}
				}
			}
		}
	})

	// Graceful shutdown of the HTTP servers when the context ends.
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(sctx) // in-flight requests get shutdownTimeout; then they are cut
		}
		return nil
	})
	return g.Wait()
}

// runnableFunc runs in every replica: the dispatcher and the endpoints
// watcher are not leader-elected (only the reconciler is).
type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

func (f runnableFunc) NeedLeaderElection() bool { return false }

func ensureStreams(ctx context.Context, js jetstream.JetStream, c stream.Config, log *slog.Logger) error {
	for wait := 100 * time.Millisecond; ; wait = min(wait*2, 5*time.Second) {
		err := stream.Ensure(ctx, js, c)
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

func ensureConsumer(ctx context.Context, js jetstream.JetStream, cfg Config, s *v1alpha2.Subscription) error {
	cc, err := stream.ConsumerConfig(s, stream.ConsumerSettings{AckWait: cfg.AckWait, Defaults: cfg.Dispatcher.Delivery})
	if err != nil {
		return fmt.Errorf("subscription %s/%s: %w", s.Namespace, s.Name, err)
	}
	_, err = stream.EnsureConsumer(ctx, js, cfg.Streams.EventStream, cc)
	return err
}

func newManager(cfg Config, log *slog.Logger) (ctrl.Manager, error) {
	ctrl.SetLogger(logging.Logr(log))
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config (use -subscriptions to run without Kubernetes): %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          cfg.LeaderElection && cfg.Has(ComponentReconciler),
		LeaderElectionID:        "kfn-eventbridge-reconciler",
		LeaderElectionNamespace: cfg.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes manager: %w", err)
	}
	return mgr, nil
}

// loadSubscriptions reads Subscriptions from manifest files, admitted as the
// API server would; any invalid document is an error.
func loadSubscriptions(ctx context.Context, files []string) ([]*v1alpha2.Subscription, error) {
	admitter, err := manifest.NewAdmitter()
	if err != nil {
		return nil, err
	}
	var docs []manifest.Document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read subscriptions: %w", err)
		}
		d, err := manifest.Decode(f, data)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	set := admitter.Load(ctx, docs)
	if len(set.Invalid) > 0 {
		return nil, errors.Join(set.Invalid...)
	}
	for _, s := range set.Subscriptions {
		if s.Namespace == "" {
			s.Namespace = "default"
		}
	}
	return set.Subscriptions, nil
}

type staticLister []*v1alpha2.Subscription

func (l staticLister) ListSubscriptions(context.Context) ([]v1alpha2.Subscription, error) {
	out := make([]v1alpha2.Subscription, 0, len(l))
	for _, s := range l {
		out = append(out, *s)
	}
	return out, nil
}

// ClusterResolver delivers to the base URLs of static (see StaticResolver);
// else, for an http sink, to the next ready endpoint of its Service that
// eps names (each delivery to the next pod, not over a connection that
// kube-proxy pinned to one, and from the moment a pod is ready, not once
// kube-proxy has written its rules); else to the sink as written. eps may
// be nil.
func ClusterResolver(eps *endpoints.Watcher, static map[string]string) dispatcher.Resolver {
	fallback := StaticResolver(static)
	if eps == nil {
		return fallback
	}
	return dispatcher.ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
		if _, ok := static[sink.Service+"."+sink.Namespace]; ok || sink.URL == nil || sink.URL.Scheme != "http" {
			return fallback.Resolve(sink)
		}
		addr, ok := eps.Pick(sink.Namespace, sink.Service)
		if !ok {
			return fallback.Resolve(sink)
		}
		u := *sink.URL
		u.Host = addr
		return u.String(), nil
	})
}

// StaticResolver delivers to the base URLs of m, keyed "<service>.<namespace>",
// with the sink's path and query; other sinks as written.
func StaticResolver(m map[string]string) dispatcher.Resolver {
	return dispatcher.ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
		base, ok := m[sink.Service+"."+sink.Namespace]
		if !ok {
			return dispatcher.DirectResolver.Resolve(sink)
		}
		u := base + sink.URL.EscapedPath()
		if sink.URL.RawQuery != "" {
			u += "?" + sink.URL.RawQuery
		}
		return u, nil
	})
}
