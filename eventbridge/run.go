package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/stream"
	"github.com/kfn-dev/kfn/eventbridge/auth"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
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
	p, err := connect(ctx, cfg, root)
	if err != nil {
		return err
	}
	defer p.nc.Close()
	if p.traces, err = otlp.Start(ctx, otlp.Config{Endpoint: cfg.TraceEndpoint}); err != nil {
		return err
	}
	defer p.stopTracing(ctx)
	if p.traces.Enabled {
		p.log.Info("tracing", "endpoint", cfg.TraceEndpoint)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	p.group = g
	for _, start := range []func(context.Context) error{
		p.kubernetes, p.dispatcher, p.subscriptions, p.publisher, p.reconciler,
		p.gateway, p.admin, p.sweepReplays, p.metrics, p.startManager, p.followNATS, p.endOnLoss,
	} {
		if err := start(ctx); err != nil {
			cancel()
			p.stopServers(ctx)
			return errors.Join(err, g.Wait())
		}
	}
	g.Go(func() error {
		<-ctx.Done()
		p.stopServers(ctx)
		return nil
	})
	return g.Wait()
}

// process is one event bridge being wired: what its components share.
type process struct {
	cfg  Config
	root *slog.Logger
	// log is for lines about the process as a whole.
	log         *slog.Logger
	token       []byte
	nc          *nats.Conn
	js          jetstream.JetStream
	reconnected chan struct{}
	reg         *prometheus.Registry
	traces      otlp.Provider
	group       *errgroup.Group

	mu      sync.Mutex // guards servers
	servers []*http.Server

	// mgr is the Kubernetes manager; nil with -subscriptions.
	mgr ctrl.Manager
	// eps watches EndpointSlices for the dispatcher and the gateway; nil
	// without Kubernetes.
	eps *endpoints.Watcher
	// d is the dispatcher, when it runs.
	d *dispatcher.Dispatcher
	// static serves the Subscriptions of -subscriptions.
	static *subscription.Set
	// lister lists Subscriptions for the publisher; nil when there are
	// none to list.
	lister publisher.SubscriptionLister
	// rec is the Subscription reconciler, when it runs.
	rec *subscription.Reconciler
}

// connect reads the token, connects to NATS and makes the streams exist.
func connect(ctx context.Context, cfg Config, root *slog.Logger) (*process, error) {
	p := &process{cfg: cfg, root: root, log: logging.Component(root, "eventbridge"), reconnected: make(chan struct{}, 1)}
	if cfg.TokenFile != "" {
		t, err := auth.ReadToken(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("-token-file: %w", err)
		}
		p.token = t
	}
	nc, err := natsconn.Connect(cfg.NATSURL, natsconn.Options{Name: "kfn-eventbridge", Log: p.log, OnReconnect: func() {
		select {
		case p.reconnected <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		return nil, err
	}
	p.nc = nc
	if p.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if err := ensureStreams(ctx, p.js, cfg.Streams, p.log); err != nil {
		nc.Close()
		return nil, err
	}
	p.reg = prometheus.NewRegistry()
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return p, nil
}

// stopTracing exports the last spans.
func (p *process) stopTracing(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := p.traces.Shutdown(sctx); err != nil {
		p.log.Warn("exporting the last spans failed", "error", err)
	}
}

// applier applies Subscriptions to JetStream with the configured consumer
// settings.
func (p *process) applier() subscription.Applier {
	return subscription.Applier{JetStream: p.js, Streams: p.cfg.Streams,
		Consumer: stream.ConsumerSettings{AckWait: p.cfg.AckWait, Defaults: p.cfg.Dispatcher.Delivery}}
}

// component returns the logger of a component.
func (p *process) component(name string) *slog.Logger { return logging.Component(p.root, name) }

// serve listens on addr now and serves h once ready is closed (nil: at
// once), until stopServers.
func (p *process) serve(ctx context.Context, name, addr string, h http.Handler, ready <-chan struct{}) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout,
		MaxHeaderBytes: publisher.MaxHeaderBytes}
	p.mu.Lock()
	p.servers = append(p.servers, srv)
	p.mu.Unlock()
	p.group.Go(func() error {
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
		p.log.Info("serving", "server", name, "address", ln.Addr().String())
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
}

// stopServers shuts the HTTP servers down: requests in flight get
// shutdownTimeout, then they are cut.
func (p *process) stopServers(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	p.mu.Lock()
	servers := p.servers
	p.mu.Unlock()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
}

// kubernetes makes the Kubernetes manager, unless Subscriptions come from
// files, and one EndpointSlice watcher for the dispatcher and the gateway.
func (p *process) kubernetes(context.Context) error {
	cfg := p.cfg
	if len(cfg.Subscriptions) > 0 {
		return nil
	}
	if !cfg.Has(ComponentReconciler) && !cfg.Has(ComponentDispatcher) && !cfg.Has(ComponentPublisher) && !cfg.Has(ComponentGateway) {
		return nil
	}
	mgr, err := newManager(cfg, p.log)
	if err != nil {
		return err
	}
	p.mgr = mgr
	if !cfg.Has(ComponentDispatcher) && !cfg.Has(ComponentGateway) {
		return nil
	}
	p.eps = endpoints.New()
	if err := mgr.Add(runnableFunc(func(ctx context.Context) error { return p.eps.Start(ctx, mgr.GetCache()) })); err != nil {
		return fmt.Errorf("add endpoints watcher: %w", err)
	}
	return nil
}

// startManager runs the Kubernetes manager, if any.
func (p *process) startManager(ctx context.Context) error {
	if p.mgr != nil {
		p.group.Go(func() error { return p.mgr.Start(ctx) })
	}
	return nil
}

// followNATS recreates, after a reconnect (NATS may be a new, empty
// server), the streams first, then every consumer.
func (p *process) followNATS(ctx context.Context) error {
	p.group.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-p.reconnected:
			}
			p.recreate(ctx)
		}
	})
	return nil
}

// endOnLoss ends Run with an error when the NATS connection closes for
// good (natsconn.Lost): nothing on it would work again, and the kubelet
// (or whoever runs the binary) starts the event bridge anew on a new one.
// Until then /healthz says so.
func (p *process) endOnLoss(ctx context.Context) error {
	lost := natsconn.Lost(ctx, p.nc)
	p.group.Go(func() error {
		select {
		case err := <-lost:
			return err
		case <-ctx.Done():
			return nil
		}
	})
	return nil
}

func (p *process) recreate(ctx context.Context) {
	if err := ensureStreams(ctx, p.js, p.cfg.Streams, p.log); err != nil {
		p.log.Error("recreating streams after a reconnect failed; the next resync retries", "error", err)
		return
	}
	if p.rec != nil {
		if err := p.rec.RequeueAll(ctx); err != nil {
			p.log.Error("requeueing subscriptions after a reconnect failed; the next resync retries", "error", err)
		}
	}
	if p.static != nil {
		for _, err := range p.static.Reapply(ctx) {
			p.log.Error("recreating a consumer after a reconnect failed", "error", err)
		}
	}
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
		// Run may run more than once in a process (tests; a process that
		// starts its event bridge again on a new NATS connection), each
		// time with a manager of its own and its controllers' names.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes manager: %w", err)
	}
	return mgr, nil
}
