package eventbridge

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/eventbridge/apirules"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/egress"
)

// Environment is the world an event bridge runs in: what differs between
// a cluster and a machine of its own. It says where the Subscriptions come
// from (and who else is told them), whether a sink is ready and where it is
// reached, where the gateway's Functions run, and where the parts may reach
// tenants' code. Cluster reads all of it from Kubernetes (cmd/eventbridge);
// Static is given it (kfn dev, -subscriptions, the benchmarks).
//
// New calls Prepare first, then the other methods as it builds the parts;
// Bridge.Run calls Run, and Reapply after each reconnect. An Environment
// serves one Bridge.
type Environment interface {
	// Prepare readies what the parts of cfg read from the environment,
	// registering its metrics on metrics (nil: none); log is the root
	// logger (package logging).
	Prepare(cfg Config, metrics prometheus.Registerer, log *slog.Logger) error
	// Egress is where deliveries, the gateway's requests and the wake
	// probes may go: Config.Dispatcher.Egress, in a cluster never the
	// Kubernetes API server.
	Egress() egress.Policy
	// Sinks tells the dispatcher whether a sink is ready (nil: always)
	// and where it delivers to it.
	Sinks() (dispatcher.Endpoints, dispatcher.Resolver)
	// Functions are the gateway's backends, where its Functions run,
	// with a channel closed once they are all known (nil: at once); an
	// error says there are none.
	Functions() (gateway.Backends, <-chan struct{}, error)
	// Serve serves the Subscriptions, their consumers made with a, to d
	// (nil when the dispatcher does not run), and returns the lister of
	// the publisher's subscribed endpoint.
	Serve(a subscription.Applier, d *dispatcher.Dispatcher) (publisher.SubscriptionLister, error)
	// Applications are Kyma's Applications, by which the publisher routes
	// events (Config.KymaApplications); nil: none.
	Applications() (publisher.Applications, error)
	// MakesConsumers tells whether this event bridge makes the
	// Subscriptions' consumers (then a missing event stream is made
	// closed, opened once they exist; see stream.ClosedSubjectPrefix).
	MakesConsumers() bool
	// Run runs the dispatcher and what serves the Subscriptions until ctx
	// ends.
	Run(ctx context.Context) error
	// Reapply makes every consumer again after NATS reconnected (it may
	// be a new, empty server), once the streams exist again; it logs what
	// failed (the next resync retries).
	Reapply(ctx context.Context)
}

// Waker is implemented by an Environment that claims a standby pod for a
// Function at zero when a scaler's activation names it (package
// contract/activation).
type Waker interface {
	// WakeThen claims a standby pod for Function namespace/name, unless
	// one is being claimed, and calls ended once that claim has ended,
	// with whether a pod was given, or at once, with false, when nothing
	// is claimed.
	WakeThen(namespace, name string, ended func(claimed bool))
}

// APIRuleServer is implemented by an Environment whose APIRules the
// gateway serves from where they are stored (a cluster's): New hands it
// the gateway when Config.ServeAPIRules is set, or has it write their
// HTTPRoutes for Config.APIRoutes' Gateway. kfn dev sets its project's
// APIRules itself (gateway.Gateway.SetAPIRules).
type APIRuleServer interface {
	ServeAPIRules(set apirules.Setter) error
	RouteAPIRules(cfg httproute.Config) error
}

var (
	_ APIRuleServer = (*Cluster)(nil)
	_ Waker         = (*Cluster)(nil)
	_ Environment   = (*Cluster)(nil)
	_ Environment   = (*Static)(nil)
)
