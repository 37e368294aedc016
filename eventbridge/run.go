package eventbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/soheilhy/cmux"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
)

// Timeouts of the HTTP servers, bounding slow clients.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 10 * time.Second
)

// Run runs the event bridge as a process of its own (cmd/eventbridge):
// it connects to NATS, makes the streams, builds the parts with New, serves
// each handler on its listener and /metrics, and runs the parts until ctx
// is done; then it shuts the listeners down gracefully and returns nil. An
// error means a part could not start or failed, or the NATS connection
// closed for good (natsconn.ErrLost). root is the logger without a
// component (package logging).
func Run(ctx context.Context, p Process, root *slog.Logger) error {
	if err := p.Validate(); err != nil {
		return err
	}
	log := logging.Component(root, "eventbridge")
	deps := Deps{Log: root}
	if p.TokenFile != "" {
		t, err := auth.ReadToken(p.TokenFile)
		if err != nil {
			return fmt.Errorf("-token-file: %w", err)
		}
		deps.Token = t
	}
	reconnected := make(chan struct{}, 1)
	deps.Reconnected = reconnected
	nc, err := natsconn.Connect(p.NATSURL, natsconn.Options{Name: "kfn-eventbridge", Log: log, Credentials: p.NATS, OnReconnect: func() {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		return err
	}
	defer nc.Close()
	deps.Conn = nc
	if err := ensureStreamsOn(ctx, nc, p, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	deps.Metrics = reg
	traces, err := otlp.Start(ctx, otlp.Config{Endpoint: p.TraceEndpoint})
	if err != nil {
		return err
	}
	defer stopTracing(ctx, traces, log)
	if traces.Enabled {
		log.Info("tracing", "endpoint", p.TraceEndpoint)
		deps.Tracer = traces
	}
	cfg := p.Config
	cfg.Admin = cfg.Admin && p.AdminListen != ""
	var metricsReaders *auth.Kubernetes
	if len(p.Subscriptions) == 0 {
		if deps.Kubernetes, err = newManager(p, log); err != nil {
			return err
		}
		adminAccess := cfg.Admin && p.AdminAuth == AdminAuthKubernetes
		gatewayAccess := cfg.Has(ComponentGateway) && p.GatewayAuth == GatewayAuthKubernetes
		senders := cfg.Has(ComponentPublisher) && p.PublisherSenders == PublisherSendersKubernetes
		metricsAccess := p.MetricsListen != "" && p.MetricsAuth == MetricsAuthKubernetes
		if adminAccess || gatewayAccess || senders || metricsAccess {
			client, err := kubernetes.NewForConfig(deps.Kubernetes.GetConfig())
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			access, err := auth.NewKubernetes(client, auth.KubernetesConfig{NewTokensPerSecond: p.NewTokensPerSecond})
			if err != nil {
				return err
			}
			// Each listener has its own budget of new tokens: callers of
			// one cannot spend another's.
			if adminAccess {
				deps.Access = access.Listener()
			}
			if gatewayAccess {
				deps.GatewayAccess = access.Listener()
			}
			if senders {
				deps.Senders = access.Listener()
				if deps.DependencyWriters, err = depcache.NewTokenReviews(client.AuthenticationV1(), 2*time.Minute); err != nil {
					return err
				}
			}
			if metricsAccess {
				metricsReaders = access.Listener()
			}
		}
	}
	b, err := New(cfg, deps)
	if err != nil {
		return err
	}
	if len(p.Subscriptions) > 0 {
		subs, err := loadSubscriptions(ctx, p.Subscriptions)
		if err != nil {
			return err
		}
		if errs := b.Subscriptions.Apply(ctx, subs); len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return serve(ctx, p, b, reg, metricsReaders, log)
}

// serve serves the bridge's handlers and /metrics on their listeners while
// the bridge runs, and shuts the listeners down when it stops. With
// readers, /metrics is served over TLS to the callers they let read it.
func serve(ctx context.Context, p Process, b *Bridge, reg *prometheus.Registry, readers *auth.Kubernetes, log *slog.Logger) error {
	h := b.Handlers()
	var servers []*http.Server
	g, ctx := errgroup.WithContext(ctx)
	// listen serves h on addr: plain HTTP without tlsConfig, TLS with it,
	// and both on the one port with plainToo (told apart by the first
	// bytes a client sends: a TLS handshake's or not).
	listen := func(name, addr string, h http.Handler, tlsConfig *tls.Config, plainToo bool) {
		if addr == "" || h == nil {
			return
		}
		srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
			IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
		servers = append(servers, srv)
		g.Go(func() error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("%s: listen on %s: %w", name, addr, err)
			}
			log.Info("serving", "server", name, "address", ln.Addr().String(), "tls", tlsConfig != nil, "plain", tlsConfig == nil || plainToo)
			serve := func(ln net.Listener) error {
				// A mux's listeners may end before Shutdown marks the
				// server closed: an error once ctx ended is the shutdown.
				if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				return nil
			}
			switch {
			case tlsConfig == nil:
				return serve(ln)
			case !plainToo:
				return serve(tls.NewListener(ln, tlsConfig))
			}
			m := cmux.New(ln)
			m.SetReadTimeout(readHeaderTimeout)
			tlsLn, plainLn := m.Match(cmux.TLS()), m.Match(cmux.Any())
			g.Go(func() error { return serve(tls.NewListener(tlsLn, tlsConfig)) })
			g.Go(func() error { <-ctx.Done(); _ = ln.Close(); return nil }) // the servers close only their own listeners
			g.Go(func() error {
				if err := m.Serve(); err != nil && ctx.Err() == nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				return nil
			})
			return serve(plainLn)
		})
	}
	// One certificate for every listener that needs one: each is an RSA
	// key pair made at start.
	var selfSigned *tls.Config
	if b.deps.Access != nil || h.Gateway != nil || (readers != nil && p.MetricsListen != "") {
		var err error
		if selfSigned, err = selfSignedTLS(); err != nil {
			return err
		}
	}
	var adminTLS *tls.Config
	if b.deps.Access != nil {
		adminTLS = selfSigned
	}
	listen("publisher", p.Listen, h.Publisher, nil, false)
	listen("gateway", p.GatewayListen, h.Gateway, selfSigned, true)
	listen("admin", p.AdminListen, h.DeadLetters, adminTLS, false)
	if p.MetricsListen != "" {
		var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
		var metricsTLS *tls.Config
		if readers != nil {
			metrics, metricsTLS = readers.Require(auth.Metrics, metrics), selfSigned
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		listen("metrics", p.MetricsListen, mux, metricsTLS, false)
	}
	g.Go(func() error { return b.Run(ctx) })
	if readers != nil {
		// The client CA, when no other listener follows it (a second Run
		// of the same CA only waits).
		g.Go(func() error { return readers.Run(ctx) })
	}
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(sctx)
		}
		return nil
	})
	return g.Wait()
}

// selfSignedTLS is the TLS of the admin API, the gateway and the metrics: a certificate made at start,
// signed by itself (the kfn command reaches the admin API through a
// port-forward, a tunnel the API server authenticated, to the pod it
// chose), and a request for the client's certificate, which auth.Kubernetes
// checks against the cluster's client CA.
func selfSignedTLS() (*tls.Config, error) {
	cfg, err := auth.SelfSignedTLS(hostname())
	if err != nil {
		return nil, err
	}
	cfg.ClientAuth = tls.RequestClientCert
	return cfg, nil
}

// ensureStreamsOn makes the streams exist before any part uses them. A
// bridge that makes consumers (the reconciler, or -subscriptions) makes a
// missing event stream closed: its opener opens it once the consumers
// exist (see stream.ClosedSubjectPrefix).
func ensureStreamsOn(ctx context.Context, nc *nats.Conn, p Process, log *slog.Logger) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return ensureStreams(ctx, js, p.Streams, len(p.Subscriptions) > 0 || p.Has(ComponentReconciler), log)
}

// stopTracing exports the last spans.
func stopTracing(ctx context.Context, traces otlp.Provider, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := traces.Shutdown(sctx); err != nil {
		log.Warn("exporting the last spans failed", "error", err)
	}
}

// newManager makes the Kubernetes manager the bridge reads Subscriptions,
// EndpointSlices and Applications with; only the reconciler is
// leader-elected.
func newManager(p Process, log *slog.Logger) (ctrl.Manager, error) {
	ctrl.SetLogger(logging.Logr(log))
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config (use -subscriptions to run without Kubernetes): %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          p.LeaderElection && p.Has(ComponentReconciler),
		LeaderElectionID:        "kfn-eventbridge-reconciler",
		LeaderElectionNamespace: p.LeaderElectionNamespace,
		// A replica that stops (a rolling update) hands the lease over at
		// once rather than after it expires: an event stream made anew
		// takes no event until the leader made the consumers (package
		// subscription, Opener). Nothing leader-elected runs after the
		// manager stopped: Run returns.
		LeaderElectionReleaseOnCancel: true,
		// Run may run more than once in a process (tests; a process that
		// starts its event bridge again on a new NATS connection), each
		// time with a manager of its own and its controllers' names.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes manager: %w", err)
	}
	return mgr, nil
}
