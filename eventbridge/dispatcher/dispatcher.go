package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/deadline"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/eventbridge/reply"
	"github.com/kfn-dev/kfn/internal/egress"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 60 * time.Second
	DefaultMaxHops        = admission.DefaultMaxHops
	DefaultJitter         = 0.2
	DefaultMaxReplyBytes  = 1 << 20
	DefaultPullExpiry     = 30 * time.Second
	DefaultBudgetInterval = 2 * time.Second
	DefaultShutdownGrace  = 10 * time.Second

	DefaultMaxHeldBytes                = 256 << 20
	DefaultMaxHeldBytesPerSubscription = 16 << 20

	// DefaultNamespaceMaxBacklog is the default Config.NamespaceMaxBacklog:
	// what one Subscription may ask for at most.
	DefaultNamespaceMaxBacklog = v1alpha2.MaxMaxBacklog
	// NamespaceShareOfStream divides the event stream's MaxBytes into the
	// default Config.NamespaceMaxBacklogBytes: 16 namespaces at their
	// total fill the stream, 15 leave a 16th of it to the others (64 MiB
	// of the default 1 GiB).
	NamespaceShareOfStream = 16

	// DefaultSlotsPerCPU is Config.DeliverySlots by default, per CPU the
	// process may use (GOMAXPROCS).
	DefaultSlotsPerCPU = 16
	DefaultSlotTime    = 2 * time.Millisecond
)

// MaxResponseHeaderBytes bounds the headers of a sink's answer (what
// NewTransport reads of them), as the publisher bounds a request's
// (publisher.MaxHeaderBytes) and JetStream an event's: an answer with more
// is a failed attempt, not 10 MiB (Go's own bound) held per delivery in
// flight.
const MaxResponseHeaderBytes = 64 << 10

// MinPullExpiry is the shortest Config.PullExpiry.
const MinPullExpiry = 100 * time.Millisecond

// ErrInvalidOption is wrapped by errors about options of New.
var ErrInvalidOption = errors.New("invalid dispatcher option")

// Config configures a Dispatcher. A zero field means its default.
type Config struct {
	// Streams names the event and dead-letter streams.
	Streams stream.Config
	// RequestTimeout bounds one delivery request: a request is given up
	// after at least RequestTimeout and at most a 64th of it more (requests
	// that start together share their deadline). Default 60s.
	RequestTimeout time.Duration
	// MaxHops bounds reply chains: a reply whose hop count would exceed it
	// is dropped. Default 16 (admission.DefaultMaxHops).
	MaxHops int
	// Reserved keeps sources for some namespaces (admission.Reservation):
	// the reply of a sink whose Subscription is of another namespace is
	// dropped, as the publisher refuses their events. The publisher's
	// reservations.
	Reserved []admission.Reservation
	// LegacyPrefix is the prefix of Kyma's legacy event types, for the
	// reservations (default v1alpha2.DefaultLegacyPrefix). The publisher's.
	LegacyPrefix string
	// Jitter is the random part of each backoff, a fraction in [0,1].
	// Default 0.2; negative means none.
	Jitter float64
	// MaxReplyBytes bounds a sink's CloudEvent reply. Default 1 MiB.
	MaxReplyBytes int64
	// PullExpiry is how long one pull request waits on the server (each
	// drawn from its last quarter). An idle Subscription costs one request
	// per expiry; a request the server lost without telling is asked again
	// within about a quarter of it more. A deleted consumer is noticed at
	// once. Default 30s.
	PullExpiry time.Duration
	// BudgetInterval is how often the backlog of a Subscription whose
	// sink failed or is not ready is read (one consumer info request) to
	// hold it to its maxBacklog. Default 2s.
	BudgetInterval time.Duration
	// ShutdownGrace bounds how long Start, once its context ends, waits
	// for deliveries in flight; past it they end (their events come again
	// after the ack wait), so that a sink that never answers cannot hold
	// up a restart of the shared dispatcher. Default 10s.
	ShutdownGrace time.Duration
	// MaxHeldBytes bounds the bytes of the events the dispatcher holds at
	// once (from their arrival to their settling, those waiting for a
	// retry included); past it, it asks for no more until some are
	// settled. MaxHeldBytesPerSubscription bounds one Subscription's
	// share, so that one with large events or a slow sink cannot take it
	// all, and a namespace holding a quarter of MaxHeldBytes or more
	// shares the other three quarters with every other such namespace,
	// the last quarter kept for namespaces holding less, so that one
	// namespace's many Subscriptions cannot take it all either. A
	// Subscription whose namespace holds nothing may take one event of
	// any size.
	// The CloudEvent replies of its sink count too, from their headers to
	// the last byte read until they are stored: a reply that does not fit
	// fails its attempt (retried), unless its event is all the
	// Subscription holds. Defaults 256 MiB and 16 MiB; negative means no
	// bound.
	MaxHeldBytes, MaxHeldBytesPerSubscription int64
	// Egress says which addresses deliveries may reach (package egress);
	// the zero value refuses loopback among others. It holds for the
	// default transport (NewTransport).
	Egress egress.Policy
	// DeliverySlots is how many events' turns (an attempt, and what
	// settles it: storing the sink's reply, acknowledging, retrying,
	// dead-lettering) run at once, shared fairly among namespaces: a
	// namespace alone may use all but a quarter kept for namespaces that
	// run few, and when turns wait, each slot that frees goes to the
	// waiting namespace that runs the fewest, so that one namespace's
	// fan-out, retries, large events or replies wait behind its own
	// work, not in front of another's (share.go). SlotTime bounds how
	// long a turn holds its slot (one to two of it; a sink that is slower
	// keeps none from the others, and the turn takes one again once it
	// answered). Defaults DefaultSlotsPerCPU per GOMAXPROCS and 2ms;
	// negative DeliverySlots means no bound.
	DeliverySlots int
	SlotTime      time.Duration
	// Delivery holds the delivery settings of the spec.config keys a
	// Subscription does not set (retries, backoff, dead-lettering); it must
	// match the stream.ConsumerSettings.Defaults the consumers were made
	// with. The zero value means v1alpha2.DefaultDelivery(), and a zero
	// MaxBacklogBytes v1alpha2.DefaultMaxBacklogBytes.
	Delivery v1alpha2.Delivery
	// NamespaceMaxBacklog and NamespaceMaxBacklogBytes bound the backlog
	// of all of one namespace's Subscriptions together, in events and in
	// bytes (each Subscription's backlog counted, so that an event waiting
	// for three of them counts three times: a namespace's fan-out costs
	// its own total). Past either, the namespace's oldest waiting events
	// are given up as over a Subscription's budget, and never another
	// namespace's; a Subscription's own maxBacklog and maxBacklogBytes
	// are held to them, so that no spec.config asks for more of the
	// shared event stream than its namespace may hold. Defaults
	// DefaultNamespaceMaxBacklog and the event stream's MaxBytes divided
	// by NamespaceShareOfStream (v1alpha2.MaxMaxBacklogBytes for a stream
	// without a limit); the bytes must not be above the stream's MaxBytes
	// nor below its MaxMsgSize.
	NamespaceMaxBacklog      int
	NamespaceMaxBacklogBytes int64
}

// admission is the policy replies are held to.
func (c *Config) admission() admission.Policy {
	return admission.Policy{Reserved: c.Reserved, LegacyPrefix: c.LegacyPrefix, MaxHops: c.MaxHops}
}

func (c *Config) defaults() error {
	if err := c.Streams.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if c.RequestTimeout < 0 || c.MaxHops < 0 || c.MaxReplyBytes < 0 || c.PullExpiry < 0 || c.Jitter > 1 {
		return fmt.Errorf("%w: negative duration, size or hop limit, or jitter above 1", ErrInvalidOption)
	}
	policy := c.admission()
	if err := policy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if c.PullExpiry != 0 && c.PullExpiry < MinPullExpiry {
		return fmt.Errorf("%w: pull expiry %s is below %s", ErrInvalidOption, c.PullExpiry, MinPullExpiry)
	}
	if c.Delivery == (v1alpha2.Delivery{}) {
		c.Delivery = v1alpha2.DefaultDelivery()
	}
	if c.Delivery.MaxBacklogBytes == 0 {
		c.Delivery.MaxBacklogBytes = v1alpha2.DefaultMaxBacklogBytes
	}
	if err := c.Delivery.Validate(); err != nil {
		return fmt.Errorf("%w: delivery defaults: %w", ErrInvalidOption, err)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxHops == 0 {
		c.MaxHops = DefaultMaxHops
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.Jitter < 0 {
		c.Jitter = 0
	}
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if c.PullExpiry == 0 {
		c.PullExpiry = DefaultPullExpiry
	}
	if c.BudgetInterval < 0 {
		return fmt.Errorf("%w: negative budget interval", ErrInvalidOption)
	}
	if c.BudgetInterval == 0 {
		c.BudgetInterval = DefaultBudgetInterval
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxHeldBytesPerSubscription == 0 {
		c.MaxHeldBytesPerSubscription = DefaultMaxHeldBytesPerSubscription
	}
	if c.SlotTime < 0 {
		return fmt.Errorf("%w: negative slot time", ErrInvalidOption)
	}
	if c.DeliverySlots == 0 {
		c.DeliverySlots = DefaultSlotsPerCPU * runtime.GOMAXPROCS(0)
	}
	if c.SlotTime == 0 {
		c.SlotTime = DefaultSlotTime
	}
	return c.namespaceDefaults()
}

// namespaceDefaults sets and checks the namespace totals.
func (c *Config) namespaceDefaults() error {
	if c.NamespaceMaxBacklog == 0 {
		c.NamespaceMaxBacklog = DefaultNamespaceMaxBacklog
	}
	if c.NamespaceMaxBacklogBytes == 0 {
		c.NamespaceMaxBacklogBytes = v1alpha2.MaxMaxBacklogBytes
		if c.Streams.MaxBytes > 0 {
			// At least one event of the largest size, at most the stream.
			c.NamespaceMaxBacklogBytes = min(max(c.Streams.MaxBytes/NamespaceShareOfStream, int64(c.Streams.MaxMsgSize)), c.Streams.MaxBytes)
			if c.Streams.MaxMsgSize < 0 {
				c.NamespaceMaxBacklogBytes = c.Streams.MaxBytes / NamespaceShareOfStream
			}
		}
	}
	largest := int64(c.Streams.MaxMsgSize)
	if c.Streams.MaxBytes > 0 && (largest < 0 || largest > c.Streams.MaxBytes) {
		largest = c.Streams.MaxBytes
	}
	switch {
	case c.NamespaceMaxBacklog < 1:
		return fmt.Errorf("%w: a namespace's total backlog must be at least 1 event, not %d", ErrInvalidOption, c.NamespaceMaxBacklog)
	case c.Streams.MaxBytes > 0 && c.NamespaceMaxBacklogBytes > c.Streams.MaxBytes:
		return fmt.Errorf("%w: a namespace's total backlog (%d bytes) must not be above the event stream's max bytes (%d)",
			ErrInvalidOption, c.NamespaceMaxBacklogBytes, c.Streams.MaxBytes)
	case c.NamespaceMaxBacklogBytes < max(largest, 1):
		return fmt.Errorf("%w: a namespace's total backlog (%d bytes) must hold at least one event of the stream's largest (%d bytes)",
			ErrInvalidOption, c.NamespaceMaxBacklogBytes, largest)
	}
	return nil
}

// Dispatcher delivers events for a changing set of Subscriptions. Tell it
// the Subscriptions with Upsert and Remove (any time, from any goroutine);
// Start runs the deliveries. Several Dispatchers, in one process or many,
// may serve the same Subscriptions: they share the durable consumers, each
// asks every consumer for events, JetStream hands each event to one of
// them, and its MaxAckPending bounds the events in flight across all of
// them. The events of a Dispatcher that dies are handed to the others
// after the consumer's ack wait.
//
// One pull.Puller serves all the Subscriptions of a Dispatcher over one
// subscription of its NATS connection; each Subscription has a goroutine
// that follows its sink's readiness and a pull.Heartbeat while it holds
// events; each event in flight is delivered on one of the Dispatcher's
// pull.Goroutines. Backlog budgets are read by one loop for all
// (budget.go).
type Dispatcher struct {
	cfg Config
	js  jetstream.JetStream
	// replies stores sinks' replies, deadLetters the events given up.
	replies     *reply.Store
	deadLetters *deadletter.Writer
	endpoints   Endpoints
	resolver    Resolver
	transport   http.RoundTripper
	log         *slog.Logger
	metrics     *metrics
	// observers are told every delivery step; tallies count them, by key
	// (a *tally each), for Counts (observer.go).
	observers []Observer
	tallies   sync.Map
	tracer    trace.Tracer // nil: no spans
	// goroutines run the deliveries and budget checks of every worker,
	// the deliveries in the turns shares gives them.
	goroutines *pull.Goroutines
	shares     *shares
	// deadlines give the delivery requests their timeout.
	deadlines *deadline.Windows

	mu      sync.Mutex
	runCtx  context.Context // nil until Start
	puller  *pull.Puller    // set by Start
	workers map[key]*worker
	wg      sync.WaitGroup
}

type key struct{ namespace, name string }

// Option configures New.
type Option func(*Dispatcher) error

// WithEndpoints sets how sink readiness is known; default AlwaysReady.
func WithEndpoints(e Endpoints) Option {
	return func(d *Dispatcher) error {
		if e == nil {
			return fmt.Errorf("%w: nil endpoints", ErrInvalidOption)
		}
		d.endpoints = e
		return nil
	}
}

// WithResolver sets how sinks map to URLs; default DirectResolver.
func WithResolver(r Resolver) Option {
	return func(d *Dispatcher) error {
		if r == nil {
			return fmt.Errorf("%w: nil resolver", ErrInvalidOption)
		}
		d.resolver = r
		return nil
	}
}

// WithTransport sets the transport deliveries are sent with; by default
// NewTransport(Config.Egress). One of another's should wrap
// NewTransport's, so that the egress policy holds (kfn dev records each
// attempt around it). Config.RequestTimeout bounds each request.
func WithTransport(rt http.RoundTripper) Option {
	return func(d *Dispatcher) error {
		if rt == nil {
			return fmt.Errorf("%w: nil transport", ErrInvalidOption)
		}
		d.transport = rt
		return nil
	}
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(d *Dispatcher) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		d.log = l
		return nil
	}
}

// WithMetrics registers the dispatcher's per-Subscription metrics (listed
// at newMetrics) with reg and records into them; it fails on a nil reg and
// when reg already holds them.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(d *Dispatcher) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		m, err := newMetrics(reg)
		if err != nil {
			return fmt.Errorf("%w: register metrics: %w", ErrInvalidOption, err)
		}
		d.metrics = m
		return nil
	}
}

// New returns a Dispatcher that pulls through js and publishes replies and
// dead letters through it.
func New(js jetstream.JetStream, cfg Config, opts ...Option) (*Dispatcher, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidOption)
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:         cfg,
		js:          js,
		replies:     reply.NewStore(js, cfg.Streams.EventStream, cfg.admission()),
		deadLetters: deadletter.NewWriter(js, cfg.Streams),
		endpoints:   AlwaysReady{},
		resolver:    DirectResolver,
		transport:   NewTransport(cfg.Egress),
		log:         slog.New(slog.DiscardHandler),
		workers:     map[key]*worker{},

		goroutines: pull.NewGoroutines(pull.DefaultIdle),
		deadlines:  deadline.New(cfg.RequestTimeout),
	}
	d.shares = newShares(cfg.DeliverySlots, cfg.SlotTime, d.goroutines.Go)
	for _, o := range opts {
		if err := o(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// NewTransport returns the HTTP transport the dispatcher uses by default:
// keep-alive connections, many per sink, no proxy, no compression,
// connections only to the addresses policy lets deliveries reach, and
// answers with at most MaxResponseHeaderBytes of headers.
func NewTransport(policy egress.Policy) *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: policy.Control}).DialContext,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    512,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
}

// maxRedirects bounds the redirects one delivery attempt follows.
const maxRedirects = 3

// do sends a delivery request and follows the sink's 307 and 308
// redirects (the event goes again, method, headers and body) to the same
// scheme, host and port only, up to maxRedirects: a redirect cannot take
// the event, on the event bridge's behalf, out of the sink it was meant for
// (to another namespace, the API server, the bridge's own admin API). Any
// other answer is the sink's answer, judged as any non-2xx status: a
// redirect elsewhere, one too many, and a 301, 302 or 303 (which would
// turn the POST into a GET without the event).
//
// The transport sends the request itself: http.Client.Do copies every
// header of every request in case a redirect needs them, which costs each
// event more than anything else the client does for it.
func (d *Dispatcher) do(req *http.Request) (*http.Response, error) {
	origin := req.URL
	for hops := 0; ; hops++ {
		resp, err := d.transport.RoundTrip(req)
		if err != nil {
			// As http.Client says it: Post "url": what went wrong.
			return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.Redacted(), Err: err}
		}
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect || loc == "" ||
			hops == maxRedirects || req.GetBody == nil {
			return resp, nil
		}
		next, err := req.URL.Parse(loc)
		if err != nil || next.Scheme != origin.Scheme || next.Host != origin.Host {
			return resp, nil // judged as the 3xx it is
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if req, err = redirected(req, next); err != nil {
			return nil, err
		}
	}
}

// redirected is req sent again to u. A transport leaves a request as it
// was but for the body it sent.
func redirected(req *http.Request, u *url.URL) (*http.Request, error) {
	next := req.Clone(req.Context())
	next.URL, next.Host = u, ""
	var err error
	if next.Body, err = req.GetBody(); err != nil {
		return nil, fmt.Errorf("follow redirect to %s: %w", u.Redacted(), err)
	}
	return next, nil
}

// target is what a worker needs of a Subscription; workers restart when it
// changes.
type target struct {
	sub      *v1alpha2.Subscription
	sink     v1alpha2.Sink
	delivery v1alpha2.Delivery
	consumer string
	// invalid, when not nil, is why the Subscription cannot be served: its
	// worker delivers nothing and only holds its consumer's backlog within
	// the budget (see Upsert).
	invalid error
}

// Upsert starts serving the Subscription, or restarts its worker if what
// matters for delivery (sink, types, source, matching, config) changed. It
// does not create the consumer: the Subscription reconciler (or local
// mode) does, and the worker waits until it exists.
//
// A Subscription whose spec cannot be served (the error wraps
// v1alpha2.ErrInvalidSink, v1alpha2.ErrInvalidConfig or
// v1alpha2.ErrInvalidEventType) gets a worker that delivers nothing: its
// consumer is kept while the spec is fixed (package subscription), and the
// worker holds the events waiting in it within the backlog budget (the
// Subscription's maxBacklog when its spec.config can be read, the last
// one served otherwise, else the default), giving up the oldest past it
// with the reason.
func (d *Dispatcher) Upsert(sub *v1alpha2.Subscription) error {
	t, err := newTarget(sub, d.cfg.Delivery)
	k := key{sub.Namespace, sub.Name}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.workers[k]
	if err != nil {
		t = holdTarget(sub, err, d.cfg.Delivery, old)
	}
	if ok && sameTarget(old.target, t) {
		return err
	}
	w := &worker{d: d, target: t, done: make(chan struct{})}
	d.workers[k] = w
	if d.runCtx != nil {
		// The new worker's pull takes over the consumer's events before
		// the old one stops: none arrives with no worker to take it.
		d.startLocked(w)
	}
	if ok {
		old.stop()
	}
	return err
}

// holdTarget is the target of a Subscription whose spec cannot be served
// (invalid says why): its consumer's name and a budget, from its own
// spec.config if that can be read, else from the worker it had (old may
// be nil), else from defaults.
func holdTarget(sub *v1alpha2.Subscription, invalid error, defaults v1alpha2.Delivery, old *worker) target {
	delivery, err := sub.DeliveryOver(defaults)
	if err != nil {
		delivery = defaults
		if old != nil {
			delivery = old.target.delivery
		}
	}
	return target{sub: sub.DeepCopy(), delivery: delivery, consumer: stream.ConsumerName(sub.Namespace, sub.Name), invalid: invalid}
}

func newTarget(sub *v1alpha2.Subscription, defaults v1alpha2.Delivery) (target, error) {
	sink, err := sub.ValidateSink()
	if err != nil {
		return target{}, err
	}
	delivery, err := sub.DeliveryOver(defaults)
	if err != nil {
		return target{}, err
	}
	return target{sub: sub.DeepCopy(), sink: sink, delivery: delivery, consumer: stream.ConsumerName(sub.Namespace, sub.Name)}, nil
}

func sameTarget(a, b target) bool {
	return a.delivery == b.delivery && a.consumer == b.consumer && (a.invalid == nil) == (b.invalid == nil) &&
		reflect.DeepEqual(a.sub.Spec, b.sub.Spec)
}

// Remove stops serving the Subscription. Deliveries in progress finish.
func (d *Dispatcher) Remove(namespace, name string) {
	k := key{namespace, name}
	d.mu.Lock()
	w, ok := d.workers[k]
	delete(d.workers, k)
	d.mu.Unlock()
	if ok {
		w.stop()
		d.metrics.forget(namespace, name)
		d.tallies.Delete(k)
	}
}

// Serving reports whether the Subscription is being served: its events
// delivered (not only held while its spec is invalid).
func (d *Dispatcher) Serving(namespace, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.workers[key{namespace, name}]
	return ok && w.target.invalid == nil
}

// Holding reports whether the Subscription's events are held, not
// delivered, because its spec cannot be served (see Upsert).
func (d *Dispatcher) Holding(namespace, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.workers[key{namespace, name}]
	return ok && w.target.invalid != nil
}

// Start serves the Subscriptions until ctx is done, then stops pulling,
// waits for the deliveries in progress (at most Config.ShutdownGrace, then
// ends them: their events come again after the ack wait), and returns nil. It is a
// controller-runtime Runnable and may be called once. It fails at once if
// it cannot subscribe to the answers of its pull requests (the connection
// is closed).
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	if d.runCtx != nil {
		d.mu.Unlock()
		return errors.New("dispatcher already started")
	}
	p, err := pull.Start(d.js.Conn(), pull.Config{
		Stream: d.cfg.Streams.EventStream, Expiry: d.cfg.PullExpiry,
		MaxHeldBytes: d.cfg.MaxHeldBytes, MaxHeldBytesPerPull: d.cfg.MaxHeldBytesPerSubscription,
	})
	if err != nil {
		d.mu.Unlock()
		return err
	}
	d.puller, d.runCtx = p, ctx
	for _, w := range d.workers {
		d.startLocked(w)
	}
	d.mu.Unlock()
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.holdBudgets(ctx) }()
	<-ctx.Done()
	p.Stop() // events on their way come again after the ack wait
	stopped := make(chan struct{})
	go func() { d.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(d.cfg.ShutdownGrace):
		// Deliveries still in flight end now; their events come again
		// after the ack wait, to this or another replica.
		d.deadlines.Stop()
		<-stopped
	}
	<-p.Closed()
	d.deadlines.Stop() // no delivery is in flight any more
	return nil
}

func (d *Dispatcher) startLocked(w *worker) {
	w.ctx, w.cancel = context.WithCancel(d.runCtx)
	w.init()
	w.space = d.shares.join(w.target.sub.Namespace)
	w.pl = d.puller.Add(w.target.sub.Namespace, w.target.consumer, w.target.delivery.MaxInFlight, w)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(w.done)
		w.run(w.ctx)
	}()
}
