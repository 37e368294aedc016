package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/local/broker"
	"github.com/kfn-dev/kfn/local/runner"
	"github.com/kfn-dev/kfn/local/senders"
	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/local/webview"
	"github.com/kfn-dev/kfn/scaler"
	"github.com/kfn-dev/kfn/scaler/activity"
)

// start brings up what Run serves: the broker, the streams, and the
// event bridge, runner and scaler objects.
func start(cfg Config) (p *Platform, lis net.Listener, err error) {
	if cfg, err = withDefaults(cfg); err != nil {
		return nil, nil, err
	}
	logs := newLogBook(1000)
	cfg.Output = supervisor.NewSyncWriter(io.MultiWriter(cfg.Output, logs))
	if cfg.Logger == nil {
		cfg.Logger = slog.New(logging.NewHandler(cfg.Output, slog.LevelInfo, logging.Text))
	}
	p = &Platform{cfg: cfg, log: cfg.Logger, out: cfg.Output, logs: logs}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.admitter, err = manifest.NewAdmitter(); err != nil {
		return nil, nil, err
	}
	lis, err = net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w (is another kfn dev running? choose another address with --addr)", cfg.Addr, err)
	}
	p.addr = lis.Addr().String()
	if ta, ok := lis.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		p.log.Warn("kfn dev listens beyond this machine: whoever reaches this address can publish events, call the functions, read their logs and dead letters, and replay them; bind 127.0.0.1 (the default) unless that is what you want",
			"address", p.addr)
	}
	if err = p.startBroker(); err == nil {
		err = p.newComponents()
	}
	if err != nil {
		_ = lis.Close()
		return nil, nil, err
	}
	return p, lis, nil
}

// withDefaults checks cfg and fills in its defaults.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Dir == "" {
		return cfg, errors.New("kfn dev: a project directory is required")
	}
	if cfg.Output == nil {
		return cfg, errors.New("kfn dev: an output is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(cfg.Dir, ".kfn")
	}
	if cfg.WatchInterval == 0 {
		cfg.WatchInterval = 500 * time.Millisecond
	}
	if cfg.DrainGrace == 0 {
		cfg.DrainGrace = 30 * time.Second
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections()
	}
	if cfg.MaxConnections < 0 {
		return cfg, fmt.Errorf("kfn dev: max connections %d: want at least 1", cfg.MaxConnections)
	}
	return cfg, nil
}

// startBroker starts the embedded NATS server and makes the streams exist.
func (p *Platform) startBroker() (err error) {
	if p.broker, err = broker.Start(broker.Config{StoreDir: filepath.Join(p.cfg.StateDir, "nats"), Port: p.cfg.NATSPort}); err != nil {
		return err
	}
	if p.nc, err = p.broker.Connect(); err != nil {
		return err
	}
	if p.js, err = jetstream.New(p.nc); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	p.streams = stream.DefaultConfig()
	p.backlogReader = activity.NewJetStreamReader(p.js, p.streams)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return jsstream.Ensure(ctx, p.js, p.streams)
}

// newComponents makes the runner and the event bridge's and the scaler's
// components, wired as in a cluster.
func (p *Platform) newComponents() (err error) {
	p.registry = prometheus.NewRegistry()
	p.endpoints = newLocalEndpoints()
	p.senders = senders.New()
	p.runner, err = runner.New(runner.Config{
		StateDir:         p.cfg.StateDir,
		DepsCacheDir:     p.cfg.DepsCacheDir,
		PublisherAddress: "http://" + p.addr + "/publish",
		Pool:             supervisor.PoolConfig{DrainGrace: p.cfg.DrainGrace, OnStopped: p.logs.Forget},
		OnChange:         p.endpoints.notify,
		// Each namespace's functions send a token of its own with their
		// events, which the publisher knows (newBridge): their events are
		// held to their namespace's bounds, as in a cluster.
		IdentityTokenFile: func(namespace string) (string, error) {
			return p.senders.File(namespace, filepath.Join(p.cfg.StateDir, "identity"))
		},
		Log: p.cfg.Output,
		// Each function is installed and started on its own: kfn dev comes
		// up once they run or after runner.DefaultStartWait, and an edit
		// is applied in the background; the watcher applies the project
		// again when one is done (watch). Without the watcher, nothing
		// would: the only load waits for every function (each bounded by
		// its install timeout, deps.DefaultTimeout, and ready wait).
		StartWait: startWait(p.cfg.WatchInterval),
	})
	if err != nil {
		return err
	}
	p.endpoints.runner = p.runner
	if p.events, err = eventpath.New(0); err != nil {
		return err
	}
	if p.scaler, err = scaler.NewParts(p.nc, p.streams, scaler.WithRefreshInterval(500*time.Millisecond), scaler.WithLogger(p.log)); err != nil {
		return err
	}
	total := DefaultMaxConnections()
	p.outbound = newOutboundConns(total, max(1, total/4), p.namespaceAt)
	if p.bridge, err = p.newBridge(); err != nil {
		return err
	}
	p.view, err = webview.New(p, p.bridge.DeadLetters, webview.Recorded(p.events), webview.Config{})
	return err
}

// startWait is the runner's StartWait for a watch interval: with the
// watcher off (negative), the first load waits for every function.
func startWait(watchInterval time.Duration) time.Duration {
	if watchInterval < 0 {
		return -1
	}
	return 0 // runner.DefaultStartWait
}

// devEgress lets deliveries reach the functions, processes of this
// machine listening on loopback, and nothing the dispatcher refuses
// anywhere else (link-local addresses and the like).
var devEgress = egress.Policy{AllowLoopback: true}

// newBridge makes the event bridge as in a cluster, on this machine: the
// functions' processes are its sinks and the gateway's backends, the
// scaler is told the Subscriptions and the gateway's in-flight requests,
// and the path of every event is recorded for the web view.
func (p *Platform) newBridge() (*eventbridge.Bridge, error) {
	cfg := eventbridge.DefaultConfig()
	cfg.Components = []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher, eventbridge.ComponentGateway}
	cfg.Streams = p.streams
	cfg.Dispatcher.Egress = devEgress
	cfg.Gateway.Source = "kfn-dev"
	// An APIRule's short host my-function is my-function.localhost, which
	// browsers and curl resolve to this machine.
	cfg.Gateway.APIRuleDomain = "localhost"
	cfg.RatesSubject = "" // one event bridge: no other replica to share its rates with
	cfg.EventPaths = 0    // kfn dev records every namespace's paths itself (p.events)
	p.subscriptions = &eventbridge.Static{Endpoints: p.endpoints, Resolver: p.endpoints, Backends: p.endpoints, Targets: []feed.Targets{p.scaler.Core}}
	return eventbridge.New(cfg, p.nc, p.subscriptions,
		eventbridge.WithLogger(p.log),
		eventbridge.WithAccess(eventbridge.Access{Senders: p.senders}),
		eventbridge.WithMetrics(p.registry),
		eventbridge.WithInFlight(p.scaler.Core),
		eventbridge.WithObserver(p.events),
		eventbridge.WithTransport(func(rt http.RoundTripper) http.RoundTripper {
			if t, ok := rt.(*http.Transport); ok {
				p.outbound.bound(t)
			}
			return p.events.Transport(rt, p.functionAt)
		}),
		// Events published without trace context start a trace, and each
		// delivery attempt gets a span id of its own, so the web view can
		// link the events a function emits to the delivery it was handling.
		eventbridge.WithStore(eventpath.TraceRoots),
	)
}

// close stops every function process, then the broker. Safe on a
// partly started Platform.
func (p *Platform) close() {
	if p.runner != nil {
		p.runner.Stop()
	}
	if p.nc != nil {
		p.nc.Close()
	}
	if p.broker != nil {
		p.broker.Stop()
	}
}
