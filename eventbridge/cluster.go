package eventbridge

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/feed"
)

// cluster is what an event bridge in a cluster reads from Kubernetes
// (Deps.Kubernetes): one EndpointSlice watcher, shared by the dispatcher
// and the gateway.
type cluster struct {
	b *Bridge
	// endpoints watches EndpointSlices; nil when neither the dispatcher
	// nor the gateway runs.
	endpoints *endpoints.Watcher
}

// newCluster adds the EndpointSlice watcher to the manager, when a part
// needs it.
func (b *Bridge) newCluster() (*cluster, error) {
	c := &cluster{b: b}
	if !b.cfg.Has(ComponentDispatcher) && !b.cfg.Has(ComponentGateway) {
		return c, nil
	}
	mgr := b.deps.Kubernetes
	var err error
	if c.endpoints, err = endpoints.New(endpoints.WithCache(mgr.GetCache()), endpoints.WithProbeInterval(b.cfg.WakeProbeInterval),
		endpoints.WithEgress(c.egress())); err != nil {
		return nil, err
	}
	if err := mgr.Add(runnableFunc(c.endpoints.Run)); err != nil {
		return nil, fmt.Errorf("add endpoints watcher: %w", err)
	}
	return c, nil
}

// egress is where the event bridge may reach tenants' code in the
// cluster: deliveries, the gateway's requests and the wake probes alike
// (Config.Dispatcher.Egress, the -sink-networks and -allow-loopback-sinks
// flags), never the Kubernetes API server.
func (c *cluster) egress() egress.Policy {
	p := c.b.cfg.Dispatcher.Egress
	p.Deny = c.apiServer()
	return p
}

// apiServer denies the Kubernetes API server: its Service address (from
// KUBERNETES_SERVICE_HOST and _PORT) and every endpoint of the Service
// default/kubernetes, so that no sink, DNS name, redirect or EndpointSlice
// makes the event bridge call the API server on a tenant's behalf from
// where it stands in the network. It asks the EndpointSlice watcher when
// it is called, and denies nothing more before there is one.
func (c *cluster) apiServer() func(netip.AddrPort) (string, bool) {
	service, _ := netip.ParseAddrPort(net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")))
	return func(a netip.AddrPort) (string, bool) {
		if a == service || c.endpoints != nil && c.endpoints.HasEndpoint(metav1.NamespaceDefault, "kubernetes", a) {
			return "the Kubernetes API server's address", true
		}
		return "", false
	}
}

// serveSubscriptions serves the cluster's Subscriptions: the dispatcher is
// fed by a feed.Feeder and runs in every replica; the reconciler, when it
// runs, is leader-elected. It returns the publisher's lister.
func (c *cluster) serveSubscriptions() (publisher.SubscriptionLister, error) {
	b, mgr := c.b, c.b.deps.Kubernetes
	if d := b.Dispatcher; d != nil {
		if err := (&feed.Feeder{Client: mgr.GetClient(), Targets: d}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up dispatcher feeder: %w", err)
		}
		if err := mgr.Add(runnableFunc(d.Start)); err != nil {
			return nil, fmt.Errorf("add dispatcher: %w", err)
		}
	}
	if b.cfg.Has(ComponentReconciler) {
		rec := &subscription.Reconciler{Client: mgr.GetClient(), Applier: b.applier(), Resync: b.cfg.Resync, Metrics: b.deps.Metrics}
		if err := rec.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up subscription reconciler: %w", err)
		}
		b.reconciler = rec
		// The opener makes consumers: it runs in the reconciler's leader
		// (a runnable that does not say otherwise is leader-elected).
		b.opener = subscription.NewOpener(b.applier(), rec.MakeConsumers, b.log)
		if b.deps.Metrics != nil {
			if err := b.opener.WithMetrics(b.deps.Metrics); err != nil {
				return nil, err
			}
		}
		if err := mgr.Add(manager.RunnableFunc(b.opener.Run)); err != nil {
			return nil, fmt.Errorf("add event stream opener: %w", err)
		}
	}
	return feed.Lister{Client: mgr.GetClient()}, nil
}

// applications watches Kyma's Applications for the publisher.
func (c *cluster) applications(log *slog.Logger) (*applications.Watcher, error) {
	mgr := c.b.deps.Kubernetes
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	opts := []applications.Option{applications.WithLogger(log)}
	if d := c.b.cfg.ApplicationCheckInterval; d > 0 {
		opts = append(opts, applications.WithCheckInterval(d))
	}
	apps, err := applications.New(disc, mgr.GetCache(), opts...)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(runnableFunc(apps.Run)); err != nil {
		return nil, fmt.Errorf("add application watcher: %w", err)
	}
	return apps, nil
}

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
	// Resolve maps "<service>.<namespace>" to a base URL to use instead of
	// the DNS name (the -resolve flag; for running outside a cluster).
	Resolve map[string]string
}

var _ gateway.Backends = ClusterBackends{}

// Known implements gateway.Backends.
func (b ClusterBackends) Known(namespace, name string) bool {
	return b.Endpoints.Function(namespace, name)
}

// Ready implements gateway.Backends.
func (b ClusterBackends) Ready(namespace, name string) (bool, <-chan struct{}) {
	return b.Endpoints.Ready(namespace, name)
}

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
