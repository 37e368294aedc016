package eventbridge

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/api/inflight"
	"github.com/kfn-dev/kfn/eventbridge/endpoints"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
)

// functionServicePort is the port of a Function's Service
// (controller/resources.ServicePort).
const functionServicePort = 80

// newGateway makes the gateway of a cluster: Functions known and ready from
// EndpointSlices, requests sent to the Function's Service, in-flight counts
// reported to the scalers over NATS under this pod's name.
func newGateway(cfg Config, nc *nats.Conn, eps *endpoints.Watcher, reg prometheus.Registerer, log *slog.Logger) (*gateway.Gateway, error) {
	pub, err := inflight.NewPublisher(nc, cfg.GatewayInFlightSubject, log)
	if err != nil {
		return nil, err
	}
	gcfg := cfg.Gateway
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("gateway: host name for its in-flight reports: %w", err)
	}
	gcfg.Source = "eventbridge/" + host
	gw, err := gateway.New(ClusterBackends{Endpoints: eps, Resolve: cfg.Resolve}, pub, gcfg, log, reg)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return gw, nil
}

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
