package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/manifest"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/internal/httpserve"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/local/autoscaler"
	"github.com/kfn-dev/kfn/local/broker"
	"github.com/kfn-dev/kfn/local/project"
	"github.com/kfn-dev/kfn/local/runner"
	"github.com/kfn-dev/kfn/local/senders"
	"github.com/kfn-dev/kfn/local/webview"
	"github.com/kfn-dev/kfn/scaler"
	"github.com/kfn-dev/kfn/scaler/activity"
)

// Config is how `kfn dev` runs. Zero values mean the defaults.
type Config struct {
	// Dir is the project directory. Required.
	Dir string
	// Addr is where the publisher, the gateway and the admin API listen;
	// default 127.0.0.1:8080. Port 0 picks a free one.
	Addr string
	// NATSPort is the embedded NATS server's client port; 0 picks a free one.
	NATSPort int
	// StateDir holds NATS's store, the runtime hosts and function files;
	// default Dir/.kfn.
	StateDir string
	// DepsCacheDir holds installed dependency sets; default StateDir/deps.
	DepsCacheDir string
	// Cooldown, when set, replaces every function's scaleConfig.cooldownPeriod
	// (handy to watch scale-to-zero without waiting minutes).
	Cooldown time.Duration
	// PollingInterval is the local autoscaler's polling interval; default 1s.
	PollingInterval time.Duration
	// ScaleDownStabilization is the autoscaler's scale-down window; default 10s.
	ScaleDownStabilization time.Duration
	// WatchInterval is how often the project's files are checked for
	// changes; default 500ms. Negative turns watching off.
	WatchInterval time.Duration
	// DrainGrace bounds how long a replaced or stopped function process may
	// finish its requests; default 30s.
	DrainGrace time.Duration
	// MaxConnections bounds the connections open at once on Addr. Past it,
	// idle keep-alive connections are closed for new ones, and the rest
	// wait to be accepted; a connection's headers must come within 10s and
	// a request's body within 30s. Default DefaultMaxConnections(): a
	// quarter of the process's file limit, at most 4,096, so that clients
	// holding connections never take the descriptors kfn dev needs.
	MaxConnections int
	// Output receives function output (each line prefixed with the
	// function) and kfn's own messages. Required.
	Output io.Writer
	// Logger receives kfn's structured logs (each component adds its name);
	// default kfn's layout (package logging) as text on Output at Info level.
	Logger *slog.Logger
}

// Platform is a running `kfn dev`: every component of kfn in one process.
type Platform struct {
	cfg    Config
	log    *slog.Logger
	out    io.Writer
	addr   string
	broker *broker.Broker
	nc     *nats.Conn
	js     jetstream.JetStream

	streams   stream.Config
	admitter  *manifest.Admitter
	runner    *runner.Runner
	endpoints *localEndpoints
	// bridge is the event bridge: publisher, dispatcher, gateway and
	// dead-letter admin API.
	bridge *eventbridge.Bridge
	// subscriptions is the bridge's environment: the project's
	// Subscriptions, served by the dispatcher and the scaler, and the
	// functions' processes as its sinks and the gateway's backends.
	subscriptions *eventbridge.Static
	// scaler is the scaler's core and gRPC server.
	scaler *scaler.Parts
	// outbound bounds the dispatcher's connections to the functions.
	outbound *outboundConns
	// backlogReader reads the Subscriptions' backlogs for Status.
	backlogReader *activity.JetStreamReader
	autoscaler    *autoscaler.Autoscaler
	registry      *prometheus.Registry
	logs          *logBook
	senders       *senders.Tokens // each namespace's token, which its functions' events carry
	// events records the path of recent events for view, the web view.
	events *eventpath.Recorder
	view   *webview.View

	mu      sync.Mutex // guards the fields below
	project *project.Project
	errors  []string // from the last load
	// notReady are the Functions of the last load that cannot run, as
	// the controller reports them (ConfigurationReady False); they are
	// not started.
	notReady []FunctionStatus
	// applied are the Functions last given to the runner, by
	// namespace/name: a Function edited into one that cannot run keeps
	// running as it was, as its Deployment does in a cluster.
	applied map[string]*serverlessv1alpha2.Function
	ready   bool
	// unread tells that the last load could not read the whole project
	// (project.Project.ReadFailed, or the directory itself): the watcher
	// reads it again.
	unread bool
}

// Addr returns host:port of the publisher, gateway and admin API.
func (p *Platform) Addr() string { return p.addr }

// NATSURL returns the embedded NATS server's client URL.
func (p *Platform) NATSURL() string { return p.broker.URL() }

// restartsPerMinute bounds how often Run starts the platform again after
// a lost NATS connection; past it, it gives up with the error.
const restartsPerMinute = 3

// Run starts kfn dev for cfg.Dir and serves until ctx ends, then stops
// every function process and the broker before it returns. started, if not
// nil, is called each time everything is up and the project is loaded.
//
// When the NATS connection closes for good (natsconn.Lost: nats.go gives a
// connection up after a protocol error of the server), nothing on it would
// work again: Run stops the platform (the functions drain) and starts it
// anew on the same addresses and store, as the kubelet restarts a pod of
// the event bridge; the events stored wait there. After restartsPerMinute
// such restarts within a minute it returns the error.
func Run(ctx context.Context, cfg Config, started func(*Platform)) error {
	var restarts []time.Time
	for {
		p, err := runOnce(ctx, cfg, started)
		if !errors.Is(err, natsconn.ErrLost) || ctx.Err() != nil {
			return err
		}
		now := time.Now()
		for len(restarts) > 0 && now.Sub(restarts[0]) > time.Minute {
			restarts = restarts[1:]
		}
		if len(restarts) == restartsPerMinute {
			return fmt.Errorf("%w (%d restarts within a minute: giving up)", err, restartsPerMinute)
		}
		restarts = append(restarts, now)
		p.log.Error("starting kfn dev again: the NATS connection closed for good", "error", err)
		cfg.Addr, cfg.NATSPort = p.addr, p.natsPort()
	}
}

// runOnce is one run of Run: it returns the Platform it ran (nil when it
// could not start) and why it ended.
func runOnce(ctx context.Context, cfg Config, started func(*Platform)) (*Platform, error) {
	p, lis, err := start(cfg)
	if err != nil {
		return nil, err
	}
	defer p.close()
	return p, p.run(ctx, lis, started)
}

// run serves the started platform until ctx ends or its NATS connection
// is lost.
func (p *Platform) run(ctx context.Context, lis net.Listener, started func(*Platform)) error {
	cfg := p.cfg

	// Two lifetimes: work (delivery, scaling, watching) ends when ctx does;
	// the servers (publisher, gateway, scaler) keep serving until the
	// functions have drained, so a handler that is still emitting an event
	// on its way out reaches the publisher.
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	serve, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	servers, serve := errgroup.WithContext(serve)
	workers, work := errgroup.WithContext(work)

	scalerAddr, stopFollowing, err := p.serve(serve, servers, lis)
	if err != nil {
		return err
	}
	defer stopFollowing()

	conn, err := grpc.NewClient(scalerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to the scaler: %w", err)
	}
	defer conn.Close()
	if p.autoscaler, err = autoscaler.New(conn, autoscaler.Config{
		PollingInterval:        cfg.PollingInterval,
		ScaleDownStabilization: cfg.ScaleDownStabilization,
	}, autoscaler.WithLogger(p.log.With("component", "autoscaler"))); err != nil {
		return err
	}
	defer p.autoscaler.Stop()
	// The bridge's Run ends with natsconn.ErrLost when the NATS
	// connection cannot come back.
	workers.Go(func() error { return p.bridge.Run(work) })

	p.reload(work)
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	if started != nil {
		started(p)
	}
	if cfg.WatchInterval >= 0 {
		workers.Go(func() error { p.watch(work); return nil })
	}

	// A server failing ends the work too.
	go func() {
		select {
		case <-serve.Done():
		case <-work.Done():
		}
		stopWork()
	}()
	<-work.Done()
	p.autoscaler.Stop()
	werr := workers.Wait()
	p.runner.Stop() // drain the functions while the servers still serve
	stopServing()
	serr := servers.Wait()
	return errors.Join(ignoreCanceled(werr), ignoreCanceled(serr))
}

// natsPort is the embedded NATS server's client port.
func (p *Platform) natsPort() int { return p.broker.Port() }

// serve runs, in servers until ctx ends, the scaler with its gRPC server
// (on a port of its own, whose address it returns), the gateway, the web
// view, and the publisher, gateway and admin API on lis. It follows the
// event stream for the web view first, so that it misses no event;
// stopFollowing ends that.
func (p *Platform) serve(ctx context.Context, servers *errgroup.Group, lis net.Listener) (scalerAddr string, stopFollowing func(), err error) {
	scalerLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen for the scaler: %w", err)
	}
	servers.Go(func() error { return p.scaler.Run(ctx, scalerLis) })
	if stopFollowing, err = p.events.Follow(ctx, p.js, p.streams.EventStream); err != nil {
		return "", nil, err
	}
	servers.Go(func() error { return p.view.Run(ctx) })
	srv, lis := newServer(p.handler(), lis, serverLimits{header: readHeaderTimeout, body: bodyTimeout, idle: idleTimeout, conns: p.cfg.MaxConnections})
	servers.Go(func() error { return httpserve.Until(ctx, srv, lis, "serve "+p.addr, 0) })
	return scalerLis.Addr().String(), stopFollowing, nil
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// reload reads the project and makes every component run what it defines.
// Problems are printed and kept for the status; they never stop the rest,
// and what a file that cannot be used or read, or a directory that cannot
// be listed, defined keeps running as it was (project.KeepFrom): a failure
// to read is never taken for files deleted. A project directory that
// cannot be read at all changes nothing. Either way the watcher reads the
// project again later (unread).
func (p *Platform) reload(ctx context.Context) {
	proj, err := project.Load(ctx, p.cfg.Dir, p.admitter)
	if err != nil {
		p.mu.Lock()
		p.unread = true
		p.mu.Unlock()
		fmt.Fprintf(p.out, "kfn: %v\n", err)
		return
	}
	p.mu.Lock()
	previous, previousProject := p.applied, p.project
	p.mu.Unlock()
	proj.KeepFrom(previousProject)
	var problems []string
	for _, e := range proj.Invalid {
		problems = append(problems, e.Error())
	}
	problems = append(problems, p.serveAPIRules(proj.APIRules)...)
	runnable, notReady := configured(proj.Functions)
	for _, f := range notReady {
		key := runner.Key(f.Namespace, f.Name)
		problems = append(problems, key+": "+f.Error)
		if fn, ok := previous[key]; ok {
			runnable = append(runnable, fn)
		}
	}
	applied := make(map[string]*serverlessv1alpha2.Function, len(runnable))
	for _, fn := range runnable {
		applied[runner.Key(fn.Namespace, fn.Name)] = fn
	}
	p.runner.SetObjects(objectsOf(proj))
	p.runner.SetSources(proj.Sources)
	for _, e := range p.runner.Apply(ctx, runnable) {
		problems = append(problems, e.Error())
	}
	for _, err := range p.subscriptions.Apply(ctx, proj.Subscriptions) {
		problems = append(problems, err.Error())
	}
	p.applyScaling(ctx)

	p.mu.Lock()
	p.project = proj
	p.errors = problems
	p.notReady = notReady
	p.applied = applied
	p.unread = proj.ReadFailed
	p.mu.Unlock()
	for _, msg := range problems {
		fmt.Fprintf(p.out, "kfn: error: %s\n", msg)
	}
}

// configured splits the Functions into those that can run and those the
// controller would report as ConfigurationReady False with reason
// InvalidFunctionSpec (Function.Validate: the checks Kyma makes after
// admission). Those are not started; their status carries the condition
// as `kfn get` shows it for a cluster.
func configured(fns []*serverlessv1alpha2.Function) ([]*serverlessv1alpha2.Function, []FunctionStatus) {
	var runnable []*serverlessv1alpha2.Function
	var notReady []FunctionStatus
	for _, fn := range fns {
		problems := fn.Validate()
		if len(problems) == 0 {
			runnable = append(runnable, fn)
			continue
		}
		notReady = append(notReady, FunctionStatus{
			Namespace: fn.Namespace, Name: fn.Name, Runtime: string(fn.Spec.Runtime),
			Autoscaled: fn.Autoscaled(), Min: int(fn.MinReplicas()), Max: int(fn.MaxReplicas()),
			Error: fmt.Sprintf("%s: %s: %s", serverlessv1alpha2.ConditionConfigurationReady, serverlessv1alpha2.ReasonInvalidFunctionSpec,
				serverlessv1alpha2.InvalidSpecMessage(problems)),
		})
	}
	return runnable, notReady
}

// applyScaling gives every autoscaled function to the autoscaler, as a
// ScaledObject with kfn's external-push trigger would give it to KEDA.
func (p *Platform) applyScaling(ctx context.Context) {
	var targets []autoscaler.Target
	for _, f := range p.runner.Functions() {
		s := f.Plan.Scaling
		if !s.Autoscaled {
			continue
		}
		cooldown := time.Duration(s.CooldownPeriod) * time.Second
		if p.cfg.Cooldown > 0 {
			cooldown = p.cfg.Cooldown
		}
		pool := f.Pool
		targets = append(targets, autoscaler.Target{
			Ref: &externalscaler.ScaledObjectRef{
				Name: f.Plan.Name, Namespace: f.Plan.Namespace,
				ScalerMetadata: trigger.Metadata{
					Function:          types.NamespacedName{Namespace: f.Plan.Namespace, Name: f.Plan.Name},
					TargetBacklog:     s.TargetBacklog,
					TargetConcurrency: s.TargetConcurrency,
				}.Render(),
			},
			Min:      int(s.MinReplicas),
			Max:      int(s.MaxReplicas),
			Cooldown: cooldown,
			Replicas: pool.Replicas,
			Scale:    pool.Scale,
		})
	}
	p.autoscaler.Set(ctx, targets)
}
