package scaler

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/scaler/server"
)

// Parts are the scaler's parts wherever it runs: the activity core and its
// gRPC server for KEDA. Every host makes them with NewParts (Run, in a
// cluster; kfn dev, package local/dev) and runs them with Parts.Run; the
// host feeds the core the Subscriptions (feed.Targets) and the gateway's
// in-flight counts.
type Parts struct {
	// Core tells each Function's backlog and activity (package
	// scaler/activity).
	Core *activity.Scaler
	// Server answers KEDA's external scaler protocol and gRPC health
	// from Core (package scaler/server).
	Server *server.Server
}

// PartsOption is what a host may add to the scaler's parts.
type PartsOption func(*partsOptions)

type partsOptions struct {
	log       *slog.Logger
	metrics   prometheus.Registerer
	tls       *tls.Config
	refresh   time.Duration
	activated func(types.NamespacedName)
	claimHold time.Duration
}

// WithLogger sets the root logger (package logging): the core logs as
// "scaler", the gRPC server as "grpc". Without it, nothing is logged.
func WithLogger(root *slog.Logger) PartsOption { return func(o *partsOptions) { o.log = root } }

// WithMetrics registers the core's and the server's metrics on reg.
// Without it, none.
func WithMetrics(reg prometheus.Registerer) PartsOption {
	return func(o *partsOptions) { o.metrics = reg }
}

// WithTLS makes the gRPC server serve TLS with cfg. Without it, plain
// gRPC.
func WithTLS(cfg *tls.Config) PartsOption { return func(o *partsOptions) { o.tls = cfg } }

// WithRefreshInterval sets how often the backlog of every consumer is
// read. Without it, activity.DefaultRefreshInterval.
func WithRefreshInterval(d time.Duration) PartsOption {
	return func(o *partsOptions) { o.refresh = d }
}

// WithActivations has the core call f with each Function that turns
// active (activity.WithActivations). Without it, none.
func WithActivations(f func(types.NamespacedName)) PartsOption {
	return func(o *partsOptions) { o.activated = f }
}

// WithClaimHold holds each activation from KEDA while the event bridge
// claims a standby pod, for at most d (activity.WithClaimHold); the
// caller reports the claims' ends to Parts.Core.ClaimEnded. Without it,
// KEDA is told at once.
func WithClaimHold(d time.Duration) PartsOption {
	return func(o *partsOptions) { o.claimHold = d }
}

// NewParts makes the core, reading the backlogs of the consumers of the
// event stream's partitions (streams: its name and count of partitions)
// and listening for activity on nc, and its gRPC server. Nothing runs
// until Run.
func NewParts(nc *nats.Conn, streams stream.Config, opts ...PartsOption) (*Parts, error) {
	o := partsOptions{log: slog.New(slog.DiscardHandler), refresh: activity.DefaultRefreshInterval}
	for _, opt := range opts {
		opt(&o)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	coreOpts := []activity.Option{activity.WithRefreshInterval(o.refresh), activity.WithLogger(logging.Component(o.log, "scaler"))}
	serverOpts := []server.Option{server.WithLogger(logging.Component(o.log, "grpc"))}
	if o.metrics != nil {
		coreOpts = append(coreOpts, activity.WithMetrics(o.metrics))
		serverOpts = append(serverOpts, server.WithMetrics(o.metrics))
	}
	if o.tls != nil {
		serverOpts = append(serverOpts, server.WithTLS(o.tls))
	}
	if o.activated != nil {
		coreOpts = append(coreOpts, activity.WithActivations(o.activated))
	}
	if o.claimHold > 0 {
		coreOpts = append(coreOpts, activity.WithClaimHold(o.claimHold))
	}
	core, err := activity.New(activity.NewJetStreamReader(js, streams), activity.NewNATSListener(nc), coreOpts...)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(core, serverOpts...)
	if err != nil {
		return nil, err
	}
	return &Parts{Core: core, Server: srv}, nil
}

// Run runs the core's refresh loop and serves gRPC on lis until ctx ends;
// an error means one of them failed.
func (p *Parts) Run(ctx context.Context, lis net.Listener) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.Core.Run(ctx) })
	g.Go(func() error { return p.Server.Serve(ctx, lis) })
	return g.Wait()
}
