package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/internal/logging"
)

// Static is the Environment of an event bridge without Kubernetes (kfn
// dev, -subscriptions, the benchmarks): its Subscriptions are those the
// host applies (Apply), their consumers made at once, and its sinks and
// Functions are found as the fields say. Use a new Static for each Bridge.
type Static struct {
	// Endpoints tells whether a sink is ready; nil: always.
	Endpoints dispatcher.Endpoints
	// Resolver maps sinks to URLs; nil: Config.Resolve, else as written.
	Resolver dispatcher.Resolver
	// Backends are where the gateway's Functions run (required for the
	// gateway).
	Backends gateway.Backends
	// Targets are told the Subscriptions too, beside the dispatcher (kfn
	// dev's scaler).
	Targets []feed.Targets

	cfg Config
	log *slog.Logger
	// metrics registers the opener's metrics; nil: none.
	metrics prometheus.Registerer
	// set serves the Subscriptions, made by Serve.
	set *subscription.Set
	// opener opens an event stream made anew once every Subscription's
	// consumer exists in it.
	opener     *subscription.Opener
	dispatcher *dispatcher.Dispatcher
}

// Prepare implements Environment.
func (s *Static) Prepare(cfg Config, metrics prometheus.Registerer, log *slog.Logger) error {
	s.cfg, s.metrics, s.log = cfg, metrics, logging.Component(log, "eventbridge")
	return nil
}

// Egress implements Environment: Config.Dispatcher.Egress.
func (s *Static) Egress() egress.Policy { return s.cfg.Dispatcher.Egress }

// Sinks implements Environment.
func (s *Static) Sinks() (dispatcher.Endpoints, dispatcher.Resolver) {
	if s.Resolver == nil {
		return s.Endpoints, StaticResolver(s.cfg.Resolve)
	}
	return s.Endpoints, s.Resolver
}

// Functions implements Environment: Static.Backends, known at once.
func (s *Static) Functions() (gateway.Backends, <-chan struct{}, error) {
	if s.Backends == nil {
		return nil, nil, errors.New("gateway: no backends: it needs Kubernetes (EndpointSlices) or Static.Backends")
	}
	return s.Backends, nil, nil
}

// Serve implements Environment: a subscription.Set serves the
// Subscriptions the host applies to the dispatcher and Static.Targets.
func (s *Static) Serve(a subscription.Applier, d *dispatcher.Dispatcher) (publisher.SubscriptionLister, error) {
	targets := s.Targets
	if d != nil {
		targets = append([]feed.Targets{d}, targets...)
	}
	s.dispatcher = d
	s.set = subscription.NewSet(a, targets...)
	s.opener = subscription.NewOpener(a, func(ctx context.Context) []error {
		return s.set.MakeConsumers(ctx, s.log)
	}, s.log)
	if s.metrics != nil {
		if err := s.opener.WithMetrics(s.metrics); err != nil {
			return nil, err
		}
	}
	return s.set, nil
}

// Applications implements Environment: none.
func (s *Static) Applications() (publisher.Applications, error) { return nil, nil }

// MakesConsumers implements Environment: it does.
func (s *Static) MakesConsumers() bool { return true }

// Run implements Environment: the dispatcher and the opener.
func (s *Static) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	if s.dispatcher != nil {
		g.Go(func() error { return s.dispatcher.Start(ctx) })
	}
	g.Go(func() error { return s.opener.Run(ctx) })
	return g.Wait()
}

// Reapply implements Environment.
func (s *Static) Reapply(ctx context.Context) {
	s.opener.Wake()
	for _, err := range s.set.Reapply(ctx) {
		s.log.Error("recreating a consumer after a reconnect failed", "error", err)
	}
}

// Apply serves subs, and stops serving the Subscriptions applied before
// that subs leaves out (subscription.Set.Apply); the errors say which
// could not be served. It may be called once New made the bridge.
func (s *Static) Apply(ctx context.Context, subs []*v1alpha2.Subscription) []error {
	if s.set == nil {
		return []error{errors.New("event bridge: Static.Apply before New")}
	}
	return s.set.Apply(ctx, subs)
}

// Subscriptions returns the Subscriptions served, as Apply left them
// (subscription.Set.Subscriptions).
func (s *Static) Subscriptions() []*v1alpha2.Subscription {
	if s.set == nil {
		return nil
	}
	return s.set.Subscriptions()
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
