package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
)

// Config tunes the autoscaler. Zero values mean the defaults.
type Config struct {
	// PollingInterval is how often IsActive and GetMetrics are asked, as
	// KEDA's pollingInterval; default 1s (KEDA's minimum; its default is 30s).
	PollingInterval time.Duration
	// ScaleDownStabilization is how long a lower replica count must be
	// wanted before the autoscaler scales down to it, as the HPA's
	// stabilization window; default 10s (the HPA's is 300s).
	ScaleDownStabilization time.Duration
	// Tolerance is the HPA's: no change while the metric is within this
	// fraction of the target; default 0.1.
	Tolerance float64
}

// ErrInvalidConfig is wrapped by New's errors about its Config.
var ErrInvalidConfig = errors.New("invalid autoscaler config")

// ErrInvalidOption is wrapped by New's errors about its options.
var ErrInvalidOption = errors.New("invalid autoscaler option")

// Option configures New; it returns an error wrapping ErrInvalidOption
// for a value it cannot use.
type Option func(*Autoscaler) error

// WithLogger logs the scaling decisions to l; without it they are not
// logged.
func WithLogger(l *slog.Logger) Option {
	return func(a *Autoscaler) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		a.log = l
		return nil
	}
}

func (o *Config) defaults() {
	if o.PollingInterval == 0 {
		o.PollingInterval = time.Second
	}
	if o.ScaleDownStabilization == 0 {
		o.ScaleDownStabilization = 10 * time.Second
	}
	if o.Tolerance == 0 {
		o.Tolerance = 0.1
	}
}

// Target is one scaled workload: what KEDA reads from a ScaledObject and
// the Deployment it scales.
type Target struct {
	// Ref is sent to the scaler (name, namespace, trigger metadata).
	Ref *externalscaler.ScaledObjectRef
	// Min and Max bound the replicas (minReplicaCount, maxReplicaCount).
	Min, Max int
	// Cooldown is how long after the last active report a workload with
	// Min 0 is scaled to zero (KEDA's cooldownPeriod).
	Cooldown time.Duration
	// Replicas returns the current replica count.
	Replicas func() int
	// Scale sets the replica count; it may block until the replicas are ready.
	Scale func(ctx context.Context, n int) error
}

// Key names a target: namespace/name.
func (t Target) Key() string { return t.Ref.GetNamespace() + "/" + t.Ref.GetName() }

// Autoscaler scales targets the way KEDA does with an external-push
// trigger, through the scaler's gRPC API: a workload at zero starts as soon
// as StreamIsActive reports it active, between 1 and Max the HPA formula on
// GetMetrics sets the count, and after Cooldown without activity it goes
// back to Min.
type Autoscaler struct {
	client externalscaler.ExternalScalerClient
	cfg    Config
	log    *slog.Logger

	mu      sync.Mutex
	loops   map[string]*loop
	stopped bool
}

// New makes an autoscaler that talks to the scaler over conn, tuned by
// cfg. It returns an error wrapping ErrInvalidConfig for a missing conn
// or a negative setting, and ErrInvalidOption for an option it cannot use.
func New(conn grpc.ClientConnInterface, cfg Config, opts ...Option) (*Autoscaler, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: a connection to the scaler is required", ErrInvalidConfig)
	}
	if cfg.PollingInterval < 0 || cfg.ScaleDownStabilization < 0 || cfg.Tolerance < 0 {
		return nil, fmt.Errorf("%w: intervals and the tolerance must not be negative", ErrInvalidConfig)
	}
	cfg.defaults()
	a := &Autoscaler{client: externalscaler.NewExternalScalerClient(conn), cfg: cfg,
		log: slog.New(slog.DiscardHandler), loops: map[string]*loop{}}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Set makes the autoscaler scale exactly targets: new ones get a loop,
// changed ones are replaced, missing ones stop being scaled (their replicas
// stay as they are).
func (a *Autoscaler) Set(ctx context.Context, targets []Target) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	want := map[string]Target{}
	for _, t := range targets {
		want[t.Key()] = t
	}
	for key, l := range a.loops {
		t, ok := want[key]
		if !ok || !l.same(t) {
			l.stop()
			delete(a.loops, key)
		}
	}
	for key, t := range want {
		if _, ok := a.loops[key]; ok {
			continue
		}
		l := newLoop(a.client, t, a.cfg, a.log)
		a.loops[key] = l
		l.start(ctx)
	}
}

// Stop ends every loop and waits for them.
func (a *Autoscaler) Stop() {
	a.mu.Lock()
	a.stopped = true
	loops := a.loops
	a.loops = map[string]*loop{}
	a.mu.Unlock()
	for _, l := range loops {
		l.stop()
	}
}

// Desired is the HPA's formula for an AverageValue metric: the replicas
// needed so that each gets at most target of total, kept at current while
// the load is within tolerance of the target, bounded by [max(min, 1), max].
func Desired(current int, total, target float64, min, max int, tolerance float64) int {
	lo := min
	if lo < 1 {
		lo = 1
	}
	if target <= 0 {
		return clamp(current, lo, max)
	}
	if current > 0 {
		ratio := total / (target * float64(current))
		if math.Abs(ratio-1) <= tolerance {
			return clamp(current, lo, max)
		}
	}
	return clamp(int(math.Ceil(total/target)), lo, max)
}

func clamp(n, lo, hi int) int {
	if n < lo {
		return lo
	}
	if n > hi {
		return hi
	}
	return n
}

type loop struct {
	client externalscaler.ExternalScalerClient
	t      Target
	cfg    Config
	log    *slog.Logger

	cancel context.CancelFunc
	done   sync.WaitGroup

	mu         sync.Mutex // serializes scaling decisions
	lastActive time.Time
	downSince  time.Time // when a lower count was first wanted
	target     float64   // per-replica target from GetMetricSpec
	metric     string
	lastErr    string
}

func newLoop(c externalscaler.ExternalScalerClient, t Target, cfg Config, log *slog.Logger) *loop {
	// Like KEDA after a ScaledObject is created: the cooldown counts from now.
	return &loop{client: c, t: t, cfg: cfg, log: log, lastActive: time.Now()}
}

func (l *loop) same(t Target) bool {
	return l.t.Min == t.Min && l.t.Max == t.Max && l.t.Cooldown == t.Cooldown &&
		fmt.Sprint(l.t.Ref.GetScalerMetadata()) == fmt.Sprint(t.Ref.GetScalerMetadata())
}

func (l *loop) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	l.cancel = cancel
	l.done.Add(2)
	go func() { defer l.done.Done(); l.stream(ctx) }()
	go func() { defer l.done.Done(); l.poll(ctx) }()
}

func (l *loop) stop() {
	l.cancel()
	l.done.Wait()
}

// stream holds StreamIsActive open, reconnecting with backoff, and starts
// the workload on each true.
func (l *loop) stream(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		s, err := l.client.StreamIsActive(ctx, l.t.Ref)
		if err == nil {
			for {
				resp, err := s.Recv()
				if err != nil {
					break
				}
				backoff = 50 * time.Millisecond
				if resp.GetResult() {
					l.activate(ctx, "pushed")
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// poll asks IsActive and GetMetrics every polling interval, as KEDA's
// scale loop and the HPA do.
func (l *loop) poll(ctx context.Context) {
	ticker := time.NewTicker(l.cfg.PollingInterval)
	defer ticker.Stop()
	for {
		l.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (l *loop) tick(ctx context.Context) {
	active, err := l.client.IsActive(ctx, l.t.Ref)
	if err != nil {
		l.report(err)
		return // KEDA keeps the replicas when the scaler fails
	}
	if active.GetResult() {
		l.activate(ctx, "polled")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	current := l.t.Replicas()
	if !active.GetResult() {
		if current > l.t.Min && l.t.Min == 0 && now.Sub(l.lastActive) >= l.t.Cooldown {
			l.scale(ctx, current, 0, "cooldown passed without activity")
		}
		return
	}
	if current == 0 {
		return
	}
	total, target, err := l.metrics(ctx)
	if err != nil {
		l.report(err)
		return
	}
	desired := Desired(current, total, target, l.t.Min, l.t.Max, l.cfg.Tolerance)
	switch {
	case desired > current:
		l.downSince = time.Time{}
		l.scale(ctx, current, desired, fmt.Sprintf("%s %.0f over target %.0f", l.metric, total, target))
	case desired < current:
		if l.downSince.IsZero() {
			l.downSince = now
		}
		if now.Sub(l.downSince) >= l.cfg.ScaleDownStabilization {
			l.downSince = time.Time{}
			l.scale(ctx, current, desired, fmt.Sprintf("%s %.0f under target %.0f", l.metric, total, target))
		}
	default:
		l.downSince = time.Time{}
	}
}

// activate records activity and starts a workload that is at zero.
func (l *loop) activate(ctx context.Context, how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastActive = time.Now()
	if current := l.t.Replicas(); current == 0 {
		l.scale(ctx, 0, max(l.t.Min, 1), "activated ("+how+")")
	}
}

func (l *loop) metrics(ctx context.Context) (total, target float64, err error) {
	if l.target == 0 {
		spec, err := l.client.GetMetricSpec(ctx, l.t.Ref)
		if err != nil {
			return 0, 0, fmt.Errorf("get metric spec: %w", err)
		}
		if len(spec.GetMetricSpecs()) == 0 {
			return 0, 0, errors.New("the scaler returned no metric")
		}
		m := spec.GetMetricSpecs()[0]
		l.metric = m.GetMetricName()
		l.target = m.GetTargetSizeFloat()
		if l.target == 0 {
			l.target = float64(m.GetTargetSize())
		}
	}
	resp, err := l.client.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: l.t.Ref, MetricName: l.metric})
	if err != nil {
		return 0, 0, fmt.Errorf("get metrics: %w", err)
	}
	for _, v := range resp.GetMetricValues() {
		if v.GetMetricValueFloat() != 0 {
			total += v.GetMetricValueFloat()
		} else {
			total += float64(v.GetMetricValue())
		}
	}
	return total, l.target, nil
}

func (l *loop) scale(ctx context.Context, from, to int, why string) {
	if from == to {
		return
	}
	l.log.Info("scale", "function", l.t.Key(), "from", from, "to", to, "reason", why)
	if err := l.t.Scale(ctx, to); err != nil && ctx.Err() == nil {
		l.log.Error("scale failed", "function", l.t.Key(), "to", to, "error", err)
	}
}

// report logs a scaler error once until it changes.
func (l *loop) report(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if msg := err.Error(); msg != l.lastErr {
		l.lastErr = msg
		l.log.Warn("scaler error; replicas unchanged", "function", l.t.Key(), "error", err)
	}
}
