package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/kfn-dev/kfn/api/feed"
	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/eventbridge/auth"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/natsconn"
)

// dispatcher makes the dispatcher (component dispatcher); the Subscriptions
// to serve are given to it by subscriptions.
func (p *process) dispatcher(context.Context) error {
	if !p.cfg.Has(ComponentDispatcher) {
		return nil
	}
	cfg := p.cfg.Dispatcher
	if cfg.Jitter == 0 {
		cfg.Jitter = -1 // 0 means none here; the dispatcher reads 0 as its default
	}
	cfg.Streams = p.cfg.Streams
	if p.eps != nil {
		cfg.Egress.Deny = apiServer(p.eps, os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	}
	dm, err := dispatcher.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	opts := []dispatcher.Option{
		dispatcher.WithLogger(p.component("dispatcher")),
		dispatcher.WithMetrics(dm),
		dispatcher.WithResolver(ClusterResolver(p.eps, p.cfg.Resolve)),
	}
	if p.eps != nil {
		opts = append(opts, dispatcher.WithEndpoints(p.eps))
	}
	if p.traces.Enabled {
		opts = append(opts, dispatcher.WithTracerProvider(p.traces))
	}
	if p.d, err = dispatcher.New(p.js, cfg, opts...); err != nil {
		return err
	}
	if err := p.reg.Register(p.d.Collector()); err != nil {
		return fmt.Errorf("register the backlog metrics: %w", err)
	}
	return nil
}

// apiServer denies deliveries the Kubernetes API server: its Service
// address (serviceHost and servicePort, from KUBERNETES_SERVICE_HOST and
// _PORT) and every endpoint of the Service default/kubernetes, so that no
// sink, DNS name or redirect makes the event bridge call the API server
// with a tenant's event from where it stands in the network.
func apiServer(eps *endpoints.Watcher, serviceHost, servicePort string) func(netip.AddrPort) (string, bool) {
	service, _ := netip.ParseAddrPort(net.JoinHostPort(serviceHost, servicePort))
	return func(a netip.AddrPort) (string, bool) {
		if a == service || eps.HasEndpoint(metav1.NamespaceDefault, "kubernetes", a) {
			return "the Kubernetes API server's address", true
		}
		return "", false
	}
}

// subscriptions serves the Subscriptions: those of -subscriptions through
// a Set (consumers made now, the dispatcher told), or those in the cluster
// through the dispatcher's Feeder; and starts the dispatcher.
func (p *process) subscriptions(ctx context.Context) error {
	if len(p.cfg.Subscriptions) > 0 {
		subs, err := loadSubscriptions(ctx, p.cfg.Subscriptions)
		if err != nil {
			return err
		}
		var targets []feed.Targets
		if p.d != nil {
			targets = append(targets, p.d)
		}
		p.static = subscription.NewSet(p.applier(), targets...)
		if errs := p.static.Apply(ctx, subs); len(errs) > 0 {
			return errors.Join(errs...)
		}
		p.lister = p.static
		if p.d != nil {
			p.group.Go(func() error { return p.d.Start(ctx) })
		}
		return nil
	}
	if p.mgr == nil {
		return nil
	}
	p.lister = feed.Lister{Client: p.mgr.GetClient()}
	if p.d == nil {
		return nil
	}
	if err := (&feed.Feeder{Client: p.mgr.GetClient(), Targets: p.d}).SetupWithManager(p.mgr); err != nil {
		return fmt.Errorf("set up dispatcher feeder: %w", err)
	}
	return p.mgr.Add(runnableFunc(p.d.Start))
}

// publisher serves the publisher (component publisher).
func (p *process) publisher(ctx context.Context) error {
	if !p.cfg.Has(ComponentPublisher) {
		return nil
	}
	pm, err := publisher.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	log := p.component("publisher")
	opts := []publisher.Option{
		publisher.WithLogger(log),
		publisher.WithMetrics(pm),
		publisher.WithReady(func(context.Context) error {
			if !p.nc.IsConnected() {
				return fmt.Errorf("not connected to NATS (%s)", p.nc.Status())
			}
			return nil
		}),
		publisher.WithLive(func(context.Context) error { return natsconn.Live(p.nc) }),
	}
	if p.lister != nil {
		opts = append(opts, publisher.WithSubscriptions(p.lister))
	}
	if p.traces.Enabled {
		opts = append(opts, publisher.WithTracerProvider(p.traces))
	}
	if p.mgr != nil && p.cfg.KymaApplications {
		apps, err := p.applications(log)
		if err != nil {
			return err
		}
		opts = append(opts, publisher.WithApplications(apps))
	}
	pub, err := publisher.New(eventstore.New(p.js, p.cfg.Streams.EventStream), p.cfg.Publisher, opts...)
	if err != nil {
		return err
	}
	p.serve(ctx, "publisher", p.cfg.Listen, auth.RequireToken(p.token, pub, "/healthz", "/readyz"), nil)
	return nil
}

// applications watches Kyma's Applications for the publisher.
func (p *process) applications(log *slog.Logger) (*applications.Watcher, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(p.mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	apps := applications.New(disc, p.cfg.ApplicationCheckInterval, log)
	if err := p.mgr.Add(runnableFunc(func(ctx context.Context) error { return apps.Start(ctx, p.mgr.GetCache()) })); err != nil {
		return nil, fmt.Errorf("add application watcher: %w", err)
	}
	return apps, nil
}

// reconciler sets up the Subscription reconciler (component reconciler, in
// a cluster).
func (p *process) reconciler(context.Context) error {
	if !p.cfg.Has(ComponentReconciler) || p.mgr == nil {
		return nil
	}
	m, err := subscription.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	p.rec = &subscription.Reconciler{Client: p.mgr.GetClient(), Applier: p.applier(), Resync: p.cfg.Resync, Metrics: m}
	if err := p.rec.SetupWithManager(p.mgr); err != nil {
		return fmt.Errorf("set up subscription reconciler: %w", err)
	}
	return nil
}

// gateway serves the gateway to Functions (component gateway), once the
// EndpointSlices are in: until then every Function would be unknown.
func (p *process) gateway(ctx context.Context) error {
	if !p.cfg.Has(ComponentGateway) {
		return nil
	}
	gw, err := newGateway(p.cfg, p.nc, p.eps, p.reg, p.component("gateway"))
	if err != nil {
		return err
	}
	p.group.Go(func() error { gw.Run(ctx.Done()); return nil })
	p.serve(ctx, "gateway", p.cfg.GatewayListen, auth.RequireToken(p.token, gw, "/healthz", "/readyz"), p.eps.Synced())
	return nil
}

// admin serves the dead-letter admin API, unless -admin-listen is empty.
func (p *process) admin(ctx context.Context) error {
	if p.cfg.AdminListen == "" {
		return nil
	}
	admin, err := deadletter.NewAdmin(p.js, p.cfg.Streams)
	if err != nil {
		return err
	}
	p.serve(ctx, "admin", p.cfg.AdminListen, admin.Handler(), nil)
	return nil
}

// sweepReplays takes replay subjects out of consumers' filters once their
// replays settled (package replay), every -replay-sweep, in a process that
// replays (the admin API) or applies Subscriptions: consumers made by a
// release that always filtered on the replay subject lose it too.
func (p *process) sweepReplays(ctx context.Context) error {
	if p.cfg.AdminListen == "" && p.static == nil && p.rec == nil {
		return nil
	}
	p.group.Go(func() error { p.applier().SweepReplays(ctx, p.cfg.ReplaySweep, p.component("replay")); return nil })
	return nil
}

// metrics serves /metrics, unless -metrics-listen is empty.
func (p *process) metrics(ctx context.Context) error {
	if p.cfg.MetricsListen == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg}))
	p.serve(ctx, "metrics", p.cfg.MetricsListen, mux, nil)
	return nil
}
