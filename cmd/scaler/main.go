// Command scaler runs kfn's KEDA external scaler: it reads the backlog of
// every Subscription's JetStream consumer, learns which Function each one
// feeds from the Subscriptions in the cluster, receives the gateway's
// in-flight counts over NATS, and answers KEDA over gRPC (externalscaler
// protocol, trigger types external and external-push), with the gRPC health
// service and Prometheus metrics. "scaler -h" lists the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/inflight"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/scaler"
	"github.com/kfn-dev/kfn/scaler/kube"
	"github.com/kfn-dev/kfn/scaler/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaler:", err)
		os.Exit(1)
	}
}

// Timeouts of the metrics HTTP server.
const (
	readHeaderTimeout = 5 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// run parses args and runs the scaler, logging to stderr, until ctx ends;
// it returns nil after a clean shutdown (and for -h), an error when it
// cannot start or fails.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("scaler", flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	root, err := logging.New(stderr, cfg.LogLevel, logging.JSON)
	if err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := logging.Component(root, "scaler")
	ctrl.SetLogger(logging.Logr(log))

	var serverOpts []server.Option
	if cfg.TLSCertFile != "" {
		tlsCfg, err := server.TLSConfig(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile)
		if err != nil {
			return err
		}
		serverOpts = append(serverOpts, server.WithTLS(tlsCfg))
	}

	nc, err := nats.Connect(cfg.NATSURL,
		nats.Name("kfn-scaler"),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("disconnected from NATS", "error", err) }),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("reconnected to NATS") }),
	)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", cfg.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	core, err := scaler.New(scaler.NewJetStreamReader(js, cfg.EventStream), scaler.NewNATSListener(nc),
		scaler.WithRefreshInterval(cfg.RefreshInterval),
		scaler.WithLogger(logging.Component(root, "scaler")),
		scaler.WithMetrics(reg))
	if err != nil {
		return err
	}
	srv, err := server.New(core, append(serverOpts, server.WithMetrics(reg), server.WithLogger(logging.Component(root, "grpc")))...)
	if err != nil {
		return err
	}

	mgr, err := newManager()
	if err != nil {
		return err
	}
	feeder := &kube.Feeder{Client: mgr.GetClient(), Core: core}
	if err := feeder.SetupWithManager(mgr); err != nil {
		return err
	}
	stopInFlight, err := inflight.Subscribe(nc, cfg.InFlightSubject, core, logging.Component(root, "inflight"))
	if err != nil {
		return err
	}
	defer stopInFlight()

	grpcLis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer grpcLis.Close() // once Serve ran, it closed it already

	var ready atomic.Bool
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Start(ctx) })
	if cfg.MetricsListen != "" {
		if err := serveMetrics(ctx, g, cfg.MetricsListen, reg, &ready, log); err != nil {
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
		g.Go(func() error { return core.Run(ctx) })
		ready.Store(true)
		log.Info("serving", "server", "grpc", "address", grpcLis.Addr().String(), "tls", cfg.TLSCertFile != "")
		return srv.Serve(ctx, grpcLis)
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
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes manager: %w", err)
	}
	return mgr, nil
}

// serveMetrics serves /metrics, /healthz (the process runs) and /readyz
// (every Subscription is known and gRPC serves) on addr until ctx ends.
func serveMetrics(ctx context.Context, g *errgroup.Group, addr string, reg *prometheus.Registry, ready *atomic.Bool, log *slog.Logger) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "subscriptions not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	log.Info("serving", "server", "metrics", "address", lis.Addr().String())
	g.Go(func() error {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	})
	return nil
}
