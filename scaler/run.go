package scaler

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/activation"
	"github.com/kfn-dev/kfn/internal/feed"
	"github.com/kfn-dev/kfn/internal/httpserve"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/internal/natsinflight"
	"github.com/kfn-dev/kfn/internal/scrape"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/scaler/server"
)

// FeederName names the controller that feeds the core the Subscriptions.
const FeederName = "scaler-subscriptions"

// Timeouts of the metrics HTTP server.
const (
	readHeaderTimeout = 5 * time.Second
	shutdownTimeout   = 5 * time.Second
)

var _ feed.Targets = (*activity.Scaler)(nil)

// Run runs the scaler until ctx ends, then stops it and returns nil; an
// error means it could not start or failed. root is the logger without a
// component (package logging): the core logs as "scaler", the gRPC
// server as "grpc", the in-flight reports as "inflight".
func Run(ctx context.Context, cfg Process, root *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := logging.Component(root, "scaler")
	ctrl.SetLogger(logging.Logr(log))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []PartsOption{WithLogger(root), WithMetrics(reg), WithRefreshInterval(cfg.RefreshInterval)}
	if cfg.TLSCertFile != "" {
		tlsCfg, err := server.TLSConfig(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile)
		if err != nil {
			return err
		}
		opts = append(opts, WithTLS(tlsCfg))
	}
	nc, err := natsconn.Connect(cfg.NATSURL, natsconn.Options{Name: "kfn-scaler", Log: log, Credentials: cfg.NATS})
	if err != nil {
		return err
	}
	defer nc.Close()
	if subject := cfg.ActivationSubject; subject != "" {
		opts = append(opts, WithActivations(func(fn types.NamespacedName) {
			if err := nc.Publish(subject, activation.Encode(fn)); err != nil {
				log.Warn("publishing an activation failed: the Function wakes once KEDA scaled it", "namespace", fn.Namespace, "function", fn.Name, "error", err)
			}
		}))
	}
	// Validate let a hold in only with both subjects.
	if cfg.ClaimHold > 0 {
		opts = append(opts, WithClaimHold(cfg.ClaimHold))
	}
	parts, err := NewParts(nc, cfg.Streams(), opts...)
	if err != nil {
		return err
	}
	if cfg.ClaimHold > 0 {
		sub, err := nc.Subscribe(cfg.ClaimedSubject, func(m *nats.Msg) {
			fn, err := activation.Decode(m.Data)
			if err != nil {
				log.Debug("dropping a claim's end that does not decode", "subject", m.Subject, "error", err)
				return
			}
			parts.Core.ClaimEnded(fn)
		})
		if err != nil {
			return fmt.Errorf("subscribe to the event bridges' claims on %s: %w", cfg.ClaimedSubject, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	stopInFlight, err := natsinflight.Subscribe(nc, parts.Core, natsinflight.WithSubject(cfg.InFlightSubject), natsinflight.WithLogger(logging.Component(root, "inflight")))
	if err != nil {
		return err
	}
	defer stopInFlight()
	return serve(ctx, cfg, parts, reg, nc, log)
}

// serve runs the Subscription feeder, the metrics server, and, once every
// Subscription is known, the parts (the core's refresh loop and the gRPC
// server).
//
// A NATS connection that closes for good (natsconn.Lost) ends it with an
// error: the kubelet then starts the scaler again on a new one.
func serve(ctx context.Context, cfg Process, parts *Parts, reg *prometheus.Registry, nc *nats.Conn, log *slog.Logger) error {
	mgr, err := newManager()
	if err != nil {
		return err
	}
	feeder := &feed.Feeder{Client: mgr.GetClient(), Targets: parts.Core, Name: FeederName}
	if err := feeder.SetupWithManager(mgr); err != nil {
		return err
	}
	grpcLis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer grpcLis.Close() // once Serve ran, it closed it already

	var ready atomic.Bool
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return natsconn.UntilLost(ctx, nc) })
	g.Go(func() error { return mgr.Start(ctx) })
	if cfg.MetricsListen != "" {
		if err := serveMetrics(ctx, g, cfg.MetricsListen, reg, &ready, nc, log); err != nil {
			return err
		}
	}
	g.Go(func() error {
		// KEDA is answered only once every Subscription is known: before
		// that, a Function with a backlog would look idle.
		if err := feeder.Prime(ctx, mgr.GetCache()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ready.Store(true)
		log.Info("serving", "server", "grpc", "address", grpcLis.Addr().String(), "tls", cfg.TLSCertFile != "")
		return parts.Run(ctx, grpcLis)
	})
	return g.Wait()
}

// newManager returns a controller-runtime manager that only reads
// Subscriptions; it has no leader election (every replica answers KEDA) and
// no metrics or probe servers of its own.
func newManager() (ctrl.Manager, error) {
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := eventingv1alpha2.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Run may run more than once in a process (tests), each time with
		// a manager of its own and its controller's name.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes manager: %w", err)
	}
	return mgr, nil
}

// serveMetrics serves /metrics, /healthz (the process runs with a NATS
// connection that can come back) and /readyz (every Subscription is known
// and gRPC serves) on addr until ctx ends.
func serveMetrics(ctx context.Context, g *errgroup.Group, addr string, reg *prometheus.Registry, ready *atomic.Bool, nc *nats.Conn, log *slog.Logger) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", scrape.Handler(reg, log))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := natsconn.Live(nc); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "subscriptions not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	log.Info("serving", "server", "metrics", "address", lis.Addr().String())
	g.Go(func() error { return httpserve.Until(ctx, srv, lis, "metrics", shutdownTimeout) })
	return nil
}
