package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kfn-dev/kfn/eventbridge/apirules"
	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/claims"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/internal/logging"
)

// Cluster is the Environment of an event bridge in a cluster: a
// Kubernetes manager it reads Subscriptions, EndpointSlices and Kyma's
// Applications with and runs its reconciler in (Run starts it). One
// EndpointSlice watcher is shared by the dispatcher and the gateway.
type Cluster struct {
	mgr     ctrl.Manager
	cfg     Config
	metrics prometheus.Registerer
	root    *slog.Logger
	log     *slog.Logger
	// endpoints watches EndpointSlices; nil when neither the dispatcher
	// nor the gateway runs.
	endpoints *endpoints.Watcher
	// reconciler is the Subscription reconciler (component reconciler).
	reconciler *subscription.Reconciler
	// opener opens an event stream made anew once every Subscription's
	// consumer exists in it; it runs in the reconciler's leader, and only
	// beside the reconciler.
	opener *subscription.Opener
}

// NewCluster returns the Environment of an event bridge reading mgr,
// which the bridge's Run starts.
func NewCluster(mgr ctrl.Manager) *Cluster { return &Cluster{mgr: mgr} }

// Prepare implements Environment: it adds the EndpointSlice watcher to
// the manager, when a part needs it.
func (c *Cluster) Prepare(cfg Config, metrics prometheus.Registerer, log *slog.Logger) error {
	c.cfg, c.metrics, c.root, c.log = cfg, metrics, log, logging.Component(log, "eventbridge")
	if !cfg.Has(ComponentDispatcher) && !cfg.Has(ComponentGateway) {
		return nil
	}
	opts := []endpoints.Option{endpoints.WithCache(c.mgr.GetCache()), endpoints.WithProbeInterval(cfg.WakeProbeInterval),
		endpoints.WithEgress(c.Egress()), endpoints.WithLogger(logging.Component(log, "claims"))}
	if metrics != nil {
		opts = append(opts, endpoints.WithMetrics(metrics))
	}
	if cl := cfg.Claims; cl.Controller != "" {
		client := claims.NewClient(cl.Controller, cl.Port, func() (string, error) {
			b, err := auth.ReadToken(cl.TokenFile)
			return string(b), err
		})
		opts = append(opts, endpoints.WithClaimer(endpoints.ClaimerFunc(func(ctx context.Context, namespace, name string) (string, error) {
			a, err := client.Claim(ctx, namespace, name)
			return a.Address, err
		}), cl.Hold))
		// The controller's review of this replica's token and permission
		// is kept fresh, so that a first event waits for neither.
		if err := c.mgr.Add(runnableFunc(func(ctx context.Context) error {
			client.KeepWarm(ctx, claimsWarmEvery)
			return nil
		})); err != nil {
			return fmt.Errorf("add the claims' warm-up: %w", err)
		}
	}
	var err error
	if c.endpoints, err = endpoints.New(opts...); err != nil {
		return err
	}
	if err := c.mgr.Add(runnableFunc(c.endpoints.Run)); err != nil {
		return fmt.Errorf("add endpoints watcher: %w", err)
	}
	return nil
}

// WakeThen implements Waker: an activation of Function namespace/name
// claims a standby pod for it, when claims are on, and ended is called
// once the claim has ended (endpoints.Watcher.WakeThen); at once when
// nothing is claimed.
func (c *Cluster) WakeThen(namespace, name string, ended func(claimed bool)) {
	if c.endpoints == nil {
		go ended(false)
		return
	}
	c.endpoints.WakeThen(namespace, name, ended)
}

// Egress implements Environment: where the event bridge may reach
// tenants' code in the cluster, deliveries, the gateway's requests and the
// wake probes alike (Config.Dispatcher.Egress, the -sink-networks and
// -allow-loopback-sinks flags), never the Kubernetes API server.
func (c *Cluster) Egress() egress.Policy {
	p := c.cfg.Dispatcher.Egress
	p.Deny = c.apiServer()
	return p
}

// apiServer denies the Kubernetes API server: its Service address (from
// KUBERNETES_SERVICE_HOST and _PORT) and every endpoint of the Service
// default/kubernetes, so that no sink, DNS name, redirect or EndpointSlice
// makes the event bridge call the API server on a tenant's behalf from
// where it stands in the network. It asks the EndpointSlice watcher when
// it is called, and denies nothing more before there is one.
func (c *Cluster) apiServer() func(netip.AddrPort) (string, bool) {
	service, _ := netip.ParseAddrPort(net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")))
	return func(a netip.AddrPort) (string, bool) {
		if a == service || c.endpoints != nil && c.endpoints.HasEndpoint(metav1.NamespaceDefault, "kubernetes", a) {
			return "the Kubernetes API server's address", true
		}
		return "", false
	}
}

// The EndpointSlice watcher tells the dispatcher of claims under way, so
// that a Function's events are pulled while its standby pod is claimed.
var _ dispatcher.Waking = (*endpoints.Watcher)(nil)

// ServeAPIRules implements APIRuleServer: every replica watches the
// cluster's APIRules, serves them with set and writes their status
// (package apirules).
func (c *Cluster) ServeAPIRules(set apirules.Setter) error {
	w := apirules.New(c.mgr.GetCache(), c.mgr.GetClient(), set, logging.Component(c.root, "apirules"))
	if err := c.mgr.Add(w); err != nil {
		return fmt.Errorf("add the APIRule watcher: %w", err)
	}
	return nil
}

// RouteAPIRules implements APIRuleServer: every replica watches the
// cluster's APIRules, applies an HTTPRoute of cfg.Parent for each
// (package httproute; the same routes from each) and writes their status.
func (c *Cluster) RouteAPIRules(cfg httproute.Config) error {
	log := logging.Component(c.root, "apirules")
	w := apirules.New(c.mgr.GetCache(), c.mgr.GetClient(), httproute.NewWriter(c.mgr.GetClient(), cfg, log), log)
	if err := c.mgr.Add(w); err != nil {
		return fmt.Errorf("add the APIRule watcher: %w", err)
	}
	return nil
}

// Sinks implements Environment: the EndpointSlice watcher, and
// ClusterResolver.
func (c *Cluster) Sinks() (dispatcher.Endpoints, dispatcher.Resolver) {
	if c.endpoints == nil {
		return nil, ClusterResolver(nil, c.cfg.Resolve)
	}
	return c.endpoints, ClusterResolver(c.endpoints, c.cfg.Resolve)
}

// Functions implements Environment: ClusterBackends, known once the
// EndpointSlices synced.
func (c *Cluster) Functions() (gateway.Backends, <-chan struct{}, error) {
	if c.endpoints == nil {
		return nil, nil, errors.New("gateway: no EndpointSlice watcher")
	}
	return ClusterBackends{Endpoints: c.endpoints, Services: c.mgr.GetCache(), Resolve: c.cfg.Resolve}, c.endpoints.Synced(), nil
}

// Serve implements Environment: the dispatcher is fed by a feed.Feeder
// and runs in every replica; the reconciler, when it runs, is
// leader-elected, and so is the opener beside it.
func (c *Cluster) Serve(a subscription.Applier, d *dispatcher.Dispatcher) (publisher.SubscriptionLister, error) {
	if d != nil {
		if err := (&feed.Feeder{Client: c.mgr.GetClient(), Targets: d}).SetupWithManager(c.mgr); err != nil {
			return nil, fmt.Errorf("set up dispatcher feeder: %w", err)
		}
		if err := c.mgr.Add(runnableFunc(d.Start)); err != nil {
			return nil, fmt.Errorf("add dispatcher: %w", err)
		}
	}
	if c.cfg.Has(ComponentReconciler) {
		if err := c.serveReconciler(a); err != nil {
			return nil, err
		}
	}
	return feed.Lister{Client: c.mgr.GetClient()}, nil
}

// serveReconciler sets up the Subscription reconciler and the opener.
func (c *Cluster) serveReconciler(a subscription.Applier) error {
	rec := &subscription.Reconciler{Client: c.mgr.GetClient(), Applier: a, Resync: c.cfg.Resync, Metrics: c.metrics}
	if err := rec.SetupWithManager(c.mgr); err != nil {
		return fmt.Errorf("set up subscription reconciler: %w", err)
	}
	c.reconciler = rec
	// The opener makes consumers: it runs in the reconciler's leader (a
	// runnable that does not say otherwise is leader-elected).
	c.opener = subscription.NewOpener(a, rec.MakeConsumers, c.log)
	if c.metrics != nil {
		if err := c.opener.WithMetrics(c.metrics); err != nil {
			return err
		}
	}
	if err := c.mgr.Add(manager.RunnableFunc(c.opener.Run)); err != nil {
		return fmt.Errorf("add event stream opener: %w", err)
	}
	return nil
}

// Applications implements Environment: with Config.KymaApplications, a
// watcher of Kyma's Applications.
func (c *Cluster) Applications() (publisher.Applications, error) {
	if !c.cfg.KymaApplications {
		return nil, nil
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	opts := []applications.Option{applications.WithLogger(logging.Component(c.root, "publisher"))}
	if d := c.cfg.ApplicationCheckInterval; d > 0 {
		opts = append(opts, applications.WithCheckInterval(d))
	}
	apps, err := applications.New(disc, c.mgr.GetCache(), opts...)
	if err != nil {
		return nil, err
	}
	if err := c.mgr.Add(runnableFunc(apps.Run)); err != nil {
		return nil, fmt.Errorf("add application watcher: %w", err)
	}
	return apps, nil
}

// MakesConsumers implements Environment: the reconciler's leader does.
func (c *Cluster) MakesConsumers() bool { return c.opener != nil }

// Run implements Environment: the manager runs the reconciler, the
// feeder, the watchers and the dispatcher.
func (c *Cluster) Run(ctx context.Context) error { return c.mgr.Start(ctx) }

// Reapply implements Environment: the opener (here or in the leader)
// opens a stream made anew once the reconciler made every consumer again.
func (c *Cluster) Reapply(ctx context.Context) {
	if c.opener != nil {
		c.opener.Wake()
	}
	if c.reconciler != nil {
		if err := c.reconciler.RequeueAll(ctx); err != nil {
			c.log.Error("requeueing subscriptions after a reconnect failed; the next resync retries", "error", err)
		}
	}
}

// claimsWarmEvery is how often the event bridge has the controller check
// it as a claim's caller (claims.Client.KeepWarm): well within the
// controller's review cache (2 minutes), so that a review expired is
// renewed within seconds, before a Function's first event needs it.
const claimsWarmEvery = 10 * time.Second

// runnableFunc runs in every replica: the dispatcher and the watchers are
// not leader-elected (only the reconciler is).
type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

func (f runnableFunc) NeedLeaderElection() bool { return false }

// functionServicePort is the port of a Function's Service
// (controller/resources.ServicePort).
const functionServicePort = 80

// ClusterBackends are the gateway's backends in a cluster: a Function is
// known when its Service has an EndpointSlice labelled as a Function's,
// ready when one of its endpoints is, and reached at its ready endpoints in
// turn (each request to the next pod, from the moment it is ready), or
// through its Service's cluster DNS name,
// <function>.<namespace>.svc.cluster.local:80, when the endpoints cannot
// be named.
type ClusterBackends struct {
	// Endpoints is the EndpointSlice watcher.
	Endpoints *endpoints.Watcher
	// Services reads the Services that are not Functions' an APIRule
	// exposes (the manager's cache); nil: an APIRule reaches Functions
	// only.
	Services client.Reader
	// Resolve maps "<service>.<namespace>" to a base URL to use instead of
	// the DNS name (the -resolve flag; for running outside a cluster).
	Resolve map[string]string
}

var (
	_ gateway.Backends = ClusterBackends{}
	_ gateway.Waker    = ClusterBackends{}
	_ gateway.Services = ClusterBackends{}
)

// ServiceAddr implements gateway.Services: a ready endpoint of the
// Service's port, from its EndpointSlices (endpoints.Watcher.PickPort,
// which the Service's port name picks), never its DNS name; an
// ExternalName Service, which names no endpoint of its own, is not one.
func (b ClusterBackends) ServiceAddr(ctx context.Context, namespace, name string, port int32) (string, error) {
	if b.Services == nil {
		return "", fmt.Errorf("%w: the gateway reaches Functions only", gateway.ErrNoService)
	}
	var svc corev1.Service
	if err := b.Services.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", gateway.ErrNoService
		}
		return "", fmt.Errorf("read the Service: %w", err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return "", fmt.Errorf("%w: an ExternalName Service has no endpoints of its own", gateway.ErrNoService)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port != port {
			continue
		}
		if addr, ok := b.Endpoints.PickPort(namespace, name, p.Name); ok {
			return addr, nil
		}
		return "", errors.New("no ready endpoint")
	}
	return "", fmt.Errorf("%w: the Service has no port %d", gateway.ErrNoService, port)
}

// Known implements gateway.Backends.
func (b ClusterBackends) Known(namespace, name string) bool {
	return b.Endpoints.Function(namespace, name)
}

// Ready implements gateway.Backends.
func (b ClusterBackends) Ready(namespace, name string) (bool, <-chan struct{}) {
	return b.Endpoints.Ready(namespace, name)
}

// Wake implements gateway.Waker: a request for a Function at zero claims
// a standby pod for it (endpoints.Watcher.Wake).
func (b ClusterBackends) Wake(namespace, name string) { b.Endpoints.Wake(namespace, name) }

// Pick implements gateway.Backends: a ready endpoint, or else the
// Service's address.
func (b ClusterBackends) Pick(namespace, name string) (string, error) {
	if base, ok := b.Resolve[name+"."+namespace]; ok {
		u, err := url.Parse(base)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("resolve %s.%s=%q: not a base URL", name, namespace, base)
		}
		return u.Host, nil
	}
	if addr, ok := b.Endpoints.Pick(namespace, name); ok {
		return addr, nil
	}
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", name, namespace, functionServicePort), nil
}

// hostname names this event bridge in the gateway's in-flight reports.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}
