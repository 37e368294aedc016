package pool

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// Labels of the pool's pods. Every pod of the pool also has
// v1alpha2.LabelManagedBy, so that the controller's cache holds it.
const (
	// LabelShape is on a standby pod: the Shape it serves.
	LabelShape = "kfn.dev/pool-shape"
	// LabelClaimedBy is on a pod the pool gave a Function: the Function's
	// name (the pod then also has the Function's pod labels).
	LabelClaimedBy = "kfn.dev/pool-claimed-by"
	// AnnotationSize, on a namespace, sets the pool size of that
	// namespace (an integer within 0..MaxSize; 0 turns its pools off),
	// instead of Config.Size.
	AnnotationSize = "kfn.dev/warm-pool-size"
)

// Defaults and bounds of Config.
const (
	// MaxSize bounds Config.Size: standby pods per namespace and shape.
	MaxSize = 20
	// MaxShapes bounds the shapes the pool keeps standby pods of in one
	// namespace: Functions of further shapes (each set of resources,
	// timeout or security contexts is one) wake on a new pod, so that a
	// namespace's Functions cannot make the pool run more than
	// MaxShapes*size pods there.
	MaxShapes           = 8
	DefaultClaimTimeout = 10 * time.Second
	DefaultClaimHold    = 30 * time.Second
	DefaultResync       = 30 * time.Second
)

// ErrInvalidConfig is wrapped by New's errors for a bad Config.
var ErrInvalidConfig = errors.New("invalid warm pool configuration")

// Config configures a Pool.
type Config struct {
	// Size is how many standby pods the pool keeps per namespace and
	// shape of Function that scales to zero, unless the namespace says
	// otherwise (AnnotationSize); 0 keeps none where no namespace asks.
	Size int
	// Resources configures the standby pods as it does Function pods.
	Resources resources.Config
	// ClaimTimeout bounds the request that gives a standby pod its
	// Function; a pod that does not answer in time is deleted and the
	// Function wakes on the Deployment path.
	ClaimTimeout time.Duration
	// ClaimHold is how long a pod claimed by a Function's first event or
	// request (Claim) is kept while the Function's Deployment is still at
	// zero: KEDA scales it up meanwhile, or the pod is retired after it.
	ClaimHold time.Duration
	// Resync is how often the pool is compared with what it should be,
	// besides after every change.
	Resync time.Duration
	// Window is how far back a pool's wakes size it: a pool of a
	// namespace without AnnotationSize keeps as many standby pods as the
	// most wakes it saw in one minute of the last Window, at least one,
	// at most Size (0: DefaultWindow).
	Window time.Duration
	// Idle is how long a pool keeps its standby pod after its Functions
	// last woke or joined it (0: DefaultIdle); then it keeps none, and
	// its next wake is on a new pod.
	Idle time.Duration
	// MaxStandby bounds the standby pods of all pools together (0:
	// DefaultMaxStandby; at most MaxMaxStandby): past it, every namespace
	// gets its first pod before any gets a second (and within one, every
	// pool), those that woke last first.
	MaxStandby int
}

// member is a Function the pool serves: its claims from zero and its
// bursts, or only its bursts when it does not scale to zero.
type member struct {
	shape      string
	plan       plan.Plan
	burstsOnly bool
}

// poolKey is one pool: a namespace and a shape.
type poolKey struct{ namespace, shape string }

// Pool keeps standby pods and gives them to Functions woken from zero.
// Observe and Forget are called by the Function reconciler; Start runs the
// pool (a controller-runtime Runnable, in the leader only).
type Pool struct {
	c     client.Client
	cache cache.Cache
	cfg   Config
	log   logr.Logger
	http  *http.Client
	// prepareHTTP sends the prepare requests, which may fetch large
	// dependency sets, bounded by prepareTimeout instead of ClaimTimeout.
	prepareHTTP *http.Client
	// key derives each standby pod's token; made at start, never stored.
	key []byte
	// address gives the host:port of a pod's host.
	address func(*corev1.Pod) string

	mu        sync.Mutex
	functions map[types.NamespacedName]member
	// taken are standby pods being given to a Function.
	taken map[types.NamespacedName]bool
	// created are pods made and not seen in the cache yet.
	created map[types.NamespacedName]poolKey
	// made are the UIDs of the standby pods the pool made, by name: a pod
	// of the same name someone else made (after deleting the pool's) is
	// not the pool's.
	made map[types.NamespacedName]types.UID
	// failed says why the last claim for a Function failed.
	failed map[types.NamespacedName]string
	// claims are the claims under way or made, by Function, until their
	// pod is retired.
	claims map[types.NamespacedName]*claimState
	// given are the pods given to each Function (claimed from zero or in a
	// burst), being loaded or serving, until they are seen deleted;
	// giving counts those whose standby pod is being taken.
	given  map[types.NamespacedName]map[types.NamespacedName]bool
	giving map[types.NamespacedName]int
	// prepared are the standby pods asked to prepare a dependency set.
	prepared map[types.NamespacedName]preparation
	// woke is when each Function was last claimed for.
	woke map[types.NamespacedName]time.Time
	// demand is what each pool's Functions asked of it (package doc:
	// Config.Window, Config.Idle).
	demand map[poolKey]*demand
	// now is the clock of the demand policy.
	now func() time.Time
	// running is whether Start runs the pool: claims are given then only.
	running bool
	// reg, standbyPods and cappedPods are WithMetrics's.
	reg         prometheus.Registerer
	standbyPods *prometheus.GaugeVec
	cappedPods  prometheus.Gauge
	kick        chan struct{}
}

// Option configures a Pool.
type Option func(*Pool)

// WithMetrics registers the pool's gauges on reg: the standby pods it
// keeps by runtime (kfn_warm_pool_standby_pods{runtime}) and those its
// demand asked for beyond Config.MaxStandby (kfn_warm_pool_capped_pods).
func WithMetrics(reg prometheus.Registerer) Option { return func(p *Pool) { p.reg = reg } }

// WithLogger sets the pool's logger.
func WithLogger(l logr.Logger) Option { return func(p *Pool) { p.log = l } }

// WithAddress sets how the pool reaches a pod's host (default: the pod's
// IP and the function container's port). Tests outside a cluster, whose
// pods have no network of their own, reach a host started beside them.
func WithAddress(f func(*corev1.Pod) string) Option { return func(p *Pool) { p.address = f } }

// New returns a Pool that makes and claims pods with c, watching
// Deployments and pods through cache (whose pods must include those with
// v1alpha2.LabelManagedBy).
func New(c client.Client, cache cache.Cache, cfg Config, opts ...Option) (*Pool, error) {
	if cfg.Size < 0 || cfg.Size > MaxSize {
		return nil, fmt.Errorf("%w: size %d is not within 0..%d", ErrInvalidConfig, cfg.Size, MaxSize)
	}
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = DefaultClaimTimeout
	}
	if cfg.ClaimHold <= 0 {
		cfg.ClaimHold = DefaultClaimHold
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.MaxStandby < 0 || cfg.MaxStandby > MaxMaxStandby {
		return nil, fmt.Errorf("%w: the most standby pods, %d, is not within 0..%d", ErrInvalidConfig, cfg.MaxStandby, MaxMaxStandby)
	}
	if cfg.MaxStandby == 0 {
		cfg.MaxStandby = DefaultMaxStandby
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make the pool's token key: %w", err)
	}
	hosts := hostTransport()
	p := &Pool{
		c: c, cache: cache, cfg: cfg, log: logr.Discard(), key: key,
		http:        &http.Client{Timeout: cfg.ClaimTimeout, Transport: hosts},
		prepareHTTP: &http.Client{Timeout: prepareTimeout, Transport: hosts},
		address:     podAddress,
		functions:   map[types.NamespacedName]member{},
		taken:       map[types.NamespacedName]bool{},
		created:     map[types.NamespacedName]poolKey{},
		made:        map[types.NamespacedName]types.UID{},
		failed:      map[types.NamespacedName]string{},
		claims:      map[types.NamespacedName]*claimState{},
		given:       map[types.NamespacedName]map[types.NamespacedName]bool{},
		giving:      map[types.NamespacedName]int{},
		demand:      map[poolKey]*demand{},
		prepared:    map[types.NamespacedName]preparation{},
		woke:        map[types.NamespacedName]time.Time{},
		now:         time.Now,
		kick:        make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(p)
	}
	if p.reg != nil {
		p.standbyPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kfn_warm_pool_standby_pods",
			Help: "Standby pods the warm pool keeps, by runtime (its demand policy's targets, within the cluster's cap)."}, []string{"runtime"})
		p.cappedPods = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kfn_warm_pool_capped_pods",
			Help: "Standby pods the pools' demand asked for beyond the cluster's cap (maxStandbyPods)."})
		// A second pool on the same registry (a test's second manager on
		// controller-runtime's global one) shares the first's gauges.
		var err error
		if p.standbyPods, err = register(p.reg, p.standbyPods); err != nil {
			return nil, err
		}
		if p.cappedPods, err = register(p.reg, p.cappedPods); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Observe records p's plan: the pool serves it when it is Eligible (and
// its namespace's pool size is not 0). It returns why the pool cannot
// serve it, nil when it can.
func (p *Pool) Observe(fn plan.Plan) error {
	key := types.NamespacedName{Namespace: fn.Namespace, Name: fn.Name}
	err := Eligible(fn)
	p.mu.Lock()
	before, had := p.functions[key]
	if err == nil {
		err = p.roomFor(key, Shape(fn, p.cfg.Resources))
	}
	if err != nil {
		delete(p.functions, key)
	} else {
		p.functions[key] = member{shape: Shape(fn, p.cfg.Resources), plan: fn, burstsOnly: !fn.Scaling.ScalesToZero()}
	}
	changed := had != (err == nil) || (err == nil && before.shape != p.functions[key].shape)
	if m := p.functions[key]; changed && err == nil && !m.burstsOnly {
		// A Function that scales to zero has its pool keep a standby pod
		// from now on; one that does not, once it scaled up (its gives
		// count as wakes).
		p.demandOf(poolKey{fn.Namespace, m.shape}).joined(p.now())
	}
	p.mu.Unlock()
	if changed {
		p.poke()
	}
	return err
}

// roomFor returns an error wrapping ErrNotPoolable when Function key's
// namespace has MaxShapes shapes pooled and shape is not one of them. p.mu
// is held.
func (p *Pool) roomFor(key types.NamespacedName, shape string) error {
	shapes := map[string]bool{}
	for k, m := range p.functions {
		if k.Namespace == key.Namespace && k != key {
			shapes[m.shape] = true
		}
	}
	if shapes[shape] || len(shapes) < MaxShapes {
		return nil
	}
	return fmt.Errorf("%w: its namespace has standby pods of %d other shapes already (image, resources, timeout, security contexts), the most the pool keeps", ErrNotPoolable, MaxShapes)
}

// ClaimFailure says why the pool could not serve fn's last wake from zero
// on a standby pod although it had one (its host could not load fn: its
// dependencies are not in the dependency cache yet, say), so that fn's
// status can say that it woke on a new pod; "" when the last claim
// succeeded, or none failed.
func (p *Pool) ClaimFailure(fn types.NamespacedName) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[fn]
}

// Forget drops a deleted Function.
func (p *Pool) Forget(fn types.NamespacedName) {
	p.mu.Lock()
	_, had := p.functions[fn]
	delete(p.functions, fn)
	delete(p.failed, fn)
	delete(p.woke, fn)
	delete(p.given, fn)
	p.mu.Unlock()
	if had {
		p.poke()
	}
}

// register registers c on reg, or returns the collector registered
// before it under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if same, ok := are.ExistingCollector.(C); ok {
				return same, nil
			}
		}
		return c, fmt.Errorf("%w: register the pool's metrics: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// demandOf returns pool k's demand. p.mu is held.
func (p *Pool) demandOf(k poolKey) *demand {
	d, ok := p.demand[k]
	if !ok {
		d = &demand{}
		p.demand[k] = d
	}
	return d
}

func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// NeedLeaderElection runs the pool in the leader only.
func (p *Pool) NeedLeaderElection() bool { return true }

// Start runs the pool until ctx ends: it deletes the standby pods of an
// earlier leader (whose tokens it cannot know), gives standby pods to
// every pooled Function whose Deployment is scaled up, for the replicas it
// has not made ready, deletes them as its Deployment's own pods become
// ready or it is scaled to zero, and keeps each pool at its target.
func (p *Pool) Start(ctx context.Context) error {
	if err := p.deleteStandby(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	p.running = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()
	unwatch, err := p.watch(ctx)
	if err != nil {
		return err
	}
	defer unwatch()
	t := time.NewTicker(p.cfg.Resync)
	defer t.Stop()
	for {
		if err := p.refill(ctx); err != nil && ctx.Err() == nil {
			p.log.Error(err, "refill the warm pool")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-t.C:
		}
	}
}
