package eventbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/eventbridge/tracing/otlp"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/certfiles"
	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/internal/scrape"
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
	opts := []Option{WithLogger(root)}
	if p.TokenFile != "" {
		t, err := auth.ReadToken(p.TokenFile)
		if err != nil {
			return fmt.Errorf("-token-file: %w", err)
		}
		opts = append(opts, WithToken(t))
	}
	nc, reconnected, err := connect(p, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	opts = append(opts, WithReconnected(reconnected))
	if err := ensureStreamsOn(ctx, nc, p, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts = append(opts, WithMetrics(reg))
	traces, err := otlp.Start(ctx, otlp.Config{Endpoint: p.TraceEndpoint})
	if err != nil {
		return err
	}
	defer stopTracing(ctx, traces, log)
	if traces.Enabled {
		log.Info("tracing", "endpoint", p.TraceEndpoint)
		opts = append(opts, WithTracer(traces))
	}
	cfg := p.Config
	cfg.Admin = cfg.Admin && p.AdminListen != ""
	cfg.ServeAPIRules = (p.ExposeListen != "" || cfg.APIRoutes != nil) && cfg.Has(ComponentGateway) && len(p.Subscriptions) == 0
	w, err := newWorld(p, cfg, log)
	if err != nil {
		return err
	}
	b, err := New(cfg, nc, w.env, append(opts, WithAccess(w.access))...)
	if err != nil {
		return err
	}
	if err := w.applySubscriptions(ctx, p); err != nil {
		return err
	}
	return serve(ctx, p, b, reg, w.metricsReaders, log)
}

// connect connects to NATS; the channel receives after each reconnect.
func connect(p Process, log *slog.Logger) (*nats.Conn, <-chan struct{}, error) {
	reconnected := make(chan struct{}, 1)
	nc, err := natsconn.Connect(p.NATSURL, natsconn.Options{Name: "kfn-eventbridge", Log: log, Credentials: p.NATS, OnReconnect: func() {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	}})
	return nc, reconnected, err
}

// world is where Run's event bridge runs: a cluster, or the Subscriptions
// of -subscriptions without Kubernetes.
type world struct {
	env Environment
	// static is env with -subscriptions.
	static *Static
	// access are the listeners' checks, in a cluster.
	access Access
	// metricsReaders, when set, are who may read /metrics.
	metricsReaders *auth.Kubernetes
}

// newWorld makes the environment Process says, with its listeners' access
// in a cluster.
func newWorld(p Process, cfg Config, log *slog.Logger) (world, error) {
	if len(p.Subscriptions) > 0 {
		s := &Static{}
		return world{env: s, static: s}, nil
	}
	mgr, err := newManager(p, log)
	if err != nil {
		return world{}, err
	}
	w := world{env: NewCluster(mgr)}
	w.access, w.metricsReaders, err = kubernetesAccess(p, cfg, mgr.GetConfig(), log)
	return w, err
}

// applySubscriptions serves the Subscriptions of -subscriptions, their
// consumers made before the publisher serves.
func (w world) applySubscriptions(ctx context.Context, p Process) error {
	if w.static == nil {
		return nil
	}
	subs, err := loadSubscriptions(ctx, p.Subscriptions)
	if err != nil {
		return err
	}
	return errors.Join(w.static.Apply(ctx, subs)...)
}

// kubernetesAccess makes the checks of the listeners whose -*-auth (and
// -publisher-senders) flags say kubernetes, and of the metrics' readers.
// Each listener has its own budget of new tokens: callers of one cannot
// spend another's.
func kubernetesAccess(p Process, cfg Config, restCfg *rest.Config, log *slog.Logger) (Access, *auth.Kubernetes, error) {
	var a Access
	adminAccess := cfg.Admin && p.AdminAuth == AdminAuthKubernetes
	gatewayAccess := cfg.Has(ComponentGateway) && p.GatewayAuth == GatewayAuthKubernetes
	senders := cfg.Has(ComponentPublisher) && p.PublisherSenders == PublisherSendersKubernetes
	metricsAccess := p.MetricsListen != "" && p.MetricsAuth == MetricsAuthKubernetes
	if !adminAccess && !gatewayAccess && !senders && !metricsAccess {
		return a, nil, nil
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return a, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	access, err := auth.NewKubernetes(client, auth.KubernetesConfig{NewTokensPerSecond: p.NewTokensPerSecond, Logger: log})
	if err != nil {
		return a, nil, err
	}
	if adminAccess {
		a.Admin = access.Listener()
	}
	if gatewayAccess {
		a.Gateway = access.Listener()
	}
	if senders {
		a.Senders = access.Listener()
		if a.DependencyWriters, err = depcache.NewTokenReviews(client.AuthenticationV1(), 2*time.Minute); err != nil {
			return a, nil, err
		}
	}
	var readers *auth.Kubernetes
	if metricsAccess {
		readers = access.Listener()
	}
	return a, readers, nil
}

// serve serves the bridge's handlers and /metrics on their listeners while
// the bridge runs, and shuts the listeners down when it stops. With
// readers, /metrics is served over TLS to the callers they let read it.
func serve(ctx context.Context, p Process, b *Bridge, reg *prometheus.Registry, readers *auth.Kubernetes, log *slog.Logger) error {
	h := b.Handlers()
	g, ctx := errgroup.WithContext(ctx)
	l := &listeners{g: g, log: log, maxConns: p.MaxConnections, perSource: p.MaxConnectionsPerSource}
	// One certificate for every listener that needs one: each is an RSA
	// key pair made at start.
	var selfSigned *tls.Config
	if b.opts.access.Admin != nil || h.Gateway != nil || (readers != nil && p.MetricsListen != "") {
		var err error
		if selfSigned, err = selfSignedTLS(); err != nil {
			return err
		}
	}
	var adminTLS *tls.Config
	if b.opts.access.Admin != nil {
		adminTLS = selfSigned
	}
	l.listen(ctx, "publisher", p.Listen, h.Publisher, nil, false, false)
	l.listen(ctx, "gateway", p.GatewayListen, h.Gateway, selfSigned, true, false)
	var exposeTLS *tls.Config
	if p.ExposeTLSCertFile != "" && h.Exposed != nil {
		var err error
		if exposeTLS, err = certfiles.ServerTLS(p.ExposeTLSCertFile, p.ExposeTLSKeyFile, "", "h2", "http/1.1"); err != nil {
			return fmt.Errorf("expose: %w", err)
		}
	}
	l.listen(ctx, "expose", p.ExposeListen, h.Exposed, exposeTLS, false, true)
	l.listen(ctx, "admin", p.AdminListen, h.DeadLetters, adminTLS, false, false)
	if p.MetricsListen != "" {
		metrics := scrape.Handler(reg, log)
		var metricsTLS *tls.Config
		if readers != nil {
			metrics, metricsTLS = readers.Require(auth.Metrics, metrics), selfSigned
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		l.listen(ctx, "metrics", p.MetricsListen, mux, metricsTLS, false, false)
	}
	g.Go(func() error { return b.Run(ctx) })
	if readers != nil {
		// The client CA, when no other listener follows it (a second Run
		// of the same CA only waits).
		g.Go(func() error { return readers.Run(ctx) })
	}
	g.Go(func() error { <-ctx.Done(); l.shutdown(ctx); return nil })
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
	if err := gatewayv2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The cache keeps no object's managedFields: nothing here reads
		// them, and a tenant's Subscription of 64 long types carries tens
		// of KiB of them.
		Cache:                   cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
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
