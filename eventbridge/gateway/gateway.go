package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/eventbridge/apiroute"
	"github.com/kfn-dev/kfn/eventbridge/extauth"
	"github.com/kfn-dev/kfn/eventbridge/jwtrule"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/seats"
)

// ColdStartHeader is set to "true" on a response whose request waited for
// the function to get a ready backend, and to "false" otherwise.
const ColdStartHeader = "X-Kfn-Cold-Start"

// Backends knows where functions run.
type Backends interface {
	// Known reports whether the function exists, so that requests for a
	// mistyped name are refused at once instead of held.
	Known(namespace, name string) bool
	// Ready reports whether the function has a ready backend, and returns
	// a channel that is closed when that may have changed. The channel is
	// never nil.
	Ready(namespace, name string) (ready bool, changed <-chan struct{})
	// Pick returns host:port of a ready backend.
	Pick(namespace, name string) (string, error)
}

// Waker is implemented by Backends that start a Function's wake on its
// first request themselves (the cluster's claims a standby pod at once):
// the gateway calls Wake for a request that finds no ready backend,
// before it holds it.
type Waker interface {
	Wake(namespace, name string)
}

// Services is implemented by Backends that also reach the Services of a
// namespace that are not Functions' (the cluster's), which an APIRule may
// expose: ServiceAddr returns host:port of a ready endpoint of the
// Service's port numbered port, never found through the Service's DNS name
// (an ExternalName Service names whatever its namespace wrote). Its error
// wraps ErrNoService when the Service or its port does not exist (404),
// and is answered 503 otherwise (no ready endpoint). Without it, an
// APIRule reaches Functions only.
type Services interface {
	ServiceAddr(ctx context.Context, namespace, name string, port int32) (string, error)
}

// ErrNoService is wrapped by a Services' error for a Service, or a port
// of it, that does not exist.
var ErrNoService = errors.New("no such Service")

// Access decides whether the caller of a request may call a Function
// (auth.Kubernetes, behind its Authenticate): a nil error allows; an error
// wrapping auth.ErrUnauthenticated is answered 401, any other 403 with its
// message. The attributes are Invoke for the Function's namespace (every
// Function of it) and, when that is refused, for the Function's name.
type Access interface {
	Allow(r *http.Request, a auth.Attributes) error
}

// Invoke is what Access is asked about a request to a Function: the verb
// create on the subresource invoke of serverless.kyma-project.io's
// functions, which an RBAC rule grants as "functions/invoke" (for one
// Function with resourceNames). The chart's aggregated ClusterRoles give
// it to edit and admin.
var Invoke = auth.Attributes{Verb: "create", Group: "serverless.kyma-project.io", Resource: "functions", Subresource: "invoke"}

// MaxResponseHeaderBytes bounds the headers of a Function's answer that
// the gateway reads (its transport), as the publisher bounds
// a request's: an answer with more is answered 502, not read up to Go's
// 10 MiB per request in flight.
const MaxResponseHeaderBytes = 64 << 10

// Defaults of Config.
const (
	// DefaultHoldTimeout is Config.HoldTimeout when unset.
	DefaultHoldTimeout = 30 * time.Second
	// DefaultMaxHeld is Config.MaxHeld when unset.
	DefaultMaxHeld = 1000
	// DefaultMaxHeldPerNamespace is Config.MaxHeldPerNamespace when unset.
	DefaultMaxHeldPerNamespace = 100
	// DefaultMaxInFlightPerNamespace is Config.MaxInFlightPerNamespace
	// when unset.
	DefaultMaxInFlightPerNamespace = 250
)

// Config tunes the gateway. Zero values mean the defaults.
type Config struct {
	// HoldTimeout is how long a request for a function without a ready
	// backend waits for one before it is answered 503; default 30s.
	HoldTimeout time.Duration
	// MaxHeld bounds the requests waiting at once, over all functions;
	// past it requests are answered 503 at once. Default 1000.
	MaxHeld int
	// MaxHeldPerNamespace bounds the requests held at once for one
	// namespace's Functions; past it that namespace's requests are
	// answered 503 at once. When namespaces hold all MaxHeld, a request
	// of a namespace that holds fewer than the one holding the most takes
	// the slot of that one's newest held request, which is answered 503:
	// no number of tenants at their cap leaves another none. Default 100.
	MaxHeldPerNamespace int
	// MaxInFlightPerNamespace bounds one namespace's requests being
	// passed on at once to its Functions and Services (through the
	// gateway's routes and its APIRules), each a goroutine, a connection
	// to the backend and its buffers here: past it that namespace's
	// requests are answered 429 with Retry-After at once, and the
	// others' go on. Default 250.
	MaxInFlightPerNamespace int
	// RetryAfter is the Retry-After of a 503; default 5s.
	RetryAfter time.Duration
	// ReportInterval is how often in-flight counts are reported while
	// there are any; default 200ms. They are valid for 5 intervals.
	ReportInterval time.Duration
	// HostSuffixes route by Host header: <function>.<namespace><suffix>.
	// Default: .svc.cluster.local and .svc.
	HostSuffixes []string
	// APIRuleDomain is the domain of an APIRule's short hosts: "my-app"
	// is my-app.<APIRuleDomain>. Empty: short hosts are refused.
	APIRuleDomain string
	// Authorizers are the external authorizers an APIRule's extAuth may
	// name (the operator's: the chart's eventbridge.gateway.authorizers).
	Authorizers []extauth.Authorizer
	// Source names this gateway instance in its in-flight reports; default "gateway".
	Source string
	// Egress says which addresses the gateway may dial to reach a
	// Function's backend, as deliveries (package egress): backends are
	// named by EndpointSlices, which a tenant may write. The zero value
	// refuses loopback among others.
	Egress egress.Policy
}

// DefaultHostSuffixes are Config.HostSuffixes' default: a cluster
// Service's names.
var DefaultHostSuffixes = []string{".svc.cluster.local", ".svc"}

func (c *Config) defaults() {
	if c.HoldTimeout == 0 {
		c.HoldTimeout = DefaultHoldTimeout
	}
	if c.MaxHeld == 0 {
		c.MaxHeld = DefaultMaxHeld
	}
	if c.MaxHeldPerNamespace == 0 {
		c.MaxHeldPerNamespace = DefaultMaxHeldPerNamespace
	}
	if c.MaxInFlightPerNamespace == 0 {
		c.MaxInFlightPerNamespace = DefaultMaxInFlightPerNamespace
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = 5 * time.Second
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = 200 * time.Millisecond
	}
	if c.HostSuffixes == nil {
		c.HostSuffixes = DefaultHostSuffixes
	}
	if c.Source == "" {
		c.Source = "gateway"
	}
}

// ErrInvalidConfig is wrapped by New's errors about its Config.
var ErrInvalidConfig = errors.New("invalid gateway config")

// ErrInvalidOption is wrapped by New's errors about its options.
var ErrInvalidOption = errors.New("invalid gateway option")

// Gateway proxies HTTP requests to functions: /{namespace}/{function}/path,
// or any path with Host <function>.<namespace>.svc.cluster.local. A
// request for a function without a ready backend signals activation and
// waits, up to HoldTimeout, for one; it is never sent to a backend that is
// not ready.
type Gateway struct {
	cfg      Config
	backends Backends
	reporter InFlightReporter
	access   Access
	log      *slog.Logger
	proxy    *httputil.ReverseProxy
	// jwks are the key sets of the APIRules' jwt rules; extAuth asks
	// their extAuth rules' authorizers.
	jwks    *jwtrule.KeySets
	extAuth *extauth.Checker
	metrics *metrics
	// apiRules are the APIRules Exposed serves (SetAPIRules).
	apiRules atomic.Pointer[apiroute.Table[exposure]]
	// passing bounds each namespace's requests passed on at once
	// (Config.MaxInFlightPerNamespace).
	passing *seats.Gate

	mu       sync.Mutex
	inFlight map[types.NamespacedName]int
	held     int                    // requests held, over all namespaces
	heldBy   map[string][]*heldSlot // per namespace, oldest first
	kick     chan struct{}          // wakes the reporter
}

// Option configures New; it returns an error wrapping ErrInvalidOption
// for a value it cannot use.
type Option func(*Gateway) error

// WithInFlightReporter reports the requests in flight to r, which
// activates Functions at zero and scales them on requests; without it the
// gateway reports nothing.
func WithInFlightReporter(r InFlightReporter) Option {
	return func(g *Gateway) error {
		if r == nil {
			return fmt.Errorf("%w: nil in-flight reporter", ErrInvalidOption)
		}
		g.reporter = r
		return nil
	}
}

// WithAccess makes the gateway ask a before it proxies a request (Invoke
// on the Function named); without it, it serves whoever reaches it (kfn
// dev, whose listener is the user's own, or a listener guarded otherwise).
func WithAccess(a Access) Option {
	return func(g *Gateway) error {
		if a == nil {
			return fmt.Errorf("%w: nil access", ErrInvalidOption)
		}
		g.access = a
		return nil
	}
}

// WithLogger logs to l; without it the gateway logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(g *Gateway) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		g.log = l
		return nil
	}
}

// WithMetrics registers the gateway's metrics (kfn_gateway_*, see the
// package doc) with reg; without it they are kept but not exported.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(g *Gateway) error {
		if reg == nil {
			return fmt.Errorf("%w: nil metrics registerer", ErrInvalidOption)
		}
		m, err := newMetrics(reg)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		g.metrics = m
		return nil
	}
}

// New makes a gateway that proxies to backends, tuned by cfg (zero values
// are the defaults). It returns an error wrapping ErrInvalidConfig for
// missing backends or a negative setting, and ErrInvalidOption for an
// option it cannot use.
func New(backends Backends, cfg Config, opts ...Option) (*Gateway, error) {
	if backends == nil {
		return nil, fmt.Errorf("%w: backends are required", ErrInvalidConfig)
	}
	if min(cfg.HoldTimeout, cfg.RetryAfter, cfg.ReportInterval) < 0 || min(cfg.MaxHeld, cfg.MaxHeldPerNamespace, cfg.MaxInFlightPerNamespace) < 0 {
		return nil, fmt.Errorf("%w: durations and limits must not be negative", ErrInvalidConfig)
	}
	cfg.defaults()
	unregistered, _ := newMetrics(nil) // never fails without a registerer
	g := &Gateway{cfg: cfg, backends: backends, log: slog.New(slog.DiscardHandler), metrics: unregistered, passing: seats.New(cfg.MaxInFlightPerNamespace),
		inFlight: map[types.NamespacedName]int{}, heldBy: map[string][]*heldSlot{}, kick: make(chan struct{}, 1)}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(g); err != nil {
			return nil, err
		}
	}
	g.jwks = jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: cfg.Egress})
	g.extAuth = extauth.New(cfg.Authorizers, extauth.Config{})
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			target := r.In.Context().Value(targetKey{}).(*url.URL)
			r.SetURL(target)
			p := r.In.Context().Value(pathKey{}).(forwardPath)
			r.Out.URL.Path, r.Out.URL.RawPath = p.path, p.escapedOrEmpty()
			r.SetXForwarded()
		},
		Transport: newTransport(cfg.Egress),
		ModifyResponse: func(resp *http.Response) error {
			if a, ok := resp.Request.Context().Value(corsKey{}).(*corsAnswer); ok {
				answerCORS(a.policy, resp.Header, a.origin)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil {
				// The request's own timeout (an APIRule's): Kyma's 504.
				failed(w, r, "the function did not answer within the request's timeout", http.StatusGatewayTimeout)
				return
			}
			g.log.Warn("backend failed", "path", r.URL.Path, "error", err)
			failed(w, r, "the function's backend failed: "+err.Error(), http.StatusBadGateway)
		},
	}
	return g, nil
}

// newTransport returns the gateway's transport to Functions: keep-alive
// connections, no proxy from the environment, connections only to the
// addresses policy lets it reach, and answers with at most
// MaxResponseHeaderBytes of headers.
func newTransport(policy egress.Policy) *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: policy.Control}).DialContext,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
}

type targetKey struct{}
type pathKey struct{}

// forwardPath is the path a request goes on with: decoded, and as the
// caller escaped it ("" when it is not known), which is what the Function
// is sent, so that an escaped "/" (%2F) stays one: decoded, a path a rule
// matched as one segment would reach the Function as others
// ("/public/a%2F..%2Fadmin" as "/public/a/../admin").
type forwardPath struct{ path, escaped string }

// escapedOrEmpty is the escaped path when it is an escaping of the path
// (Go's URL then sends it as is), else "".
func (p forwardPath) escapedOrEmpty() string {
	if p.escaped == "" {
		return ""
	}
	if decoded, err := url.PathUnescape(p.escaped); err != nil || decoded != p.path {
		return ""
	}
	return p.escaped
}

// escapedTail is the end of r's escaped path that escapes path, the end
// of r's path ("" when r's escaped path does not end so: the client
// escaped a character of what comes before).
func escapedTail(r *http.Request, path string) string {
	esc := r.URL.EscapedPath()
	for i := len(esc); i >= 0; i-- {
		if i < len(esc) && esc[i] != '/' {
			continue
		}
		tail := esc[i:]
		if tail == "" {
			tail = "/"
		}
		if decoded, err := url.PathUnescape(tail); err == nil && decoded == path {
			return tail
		}
		if len(tail) > 3*len(path)+1 {
			break
		}
	}
	return ""
}

// Route returns the function a request is for and the path within it,
// or ok false when the request names no function.
func (g *Gateway) Route(r *http.Request) (fn types.NamespacedName, path string, ok bool) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, suffix := range g.cfg.HostSuffixes {
		if name, ns, found := strings.Cut(strings.TrimSuffix(host, suffix), "."); strings.HasSuffix(host, suffix) && found && name != "" && ns != "" && !strings.Contains(ns, ".") {
			return types.NamespacedName{Namespace: ns, Name: name}, r.URL.Path, true
		}
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return types.NamespacedName{}, "", false
	}
	path = "/"
	if len(parts) == 3 {
		path += parts[2]
	}
	return types.NamespacedName{Namespace: parts[0], Name: parts[1]}, path, true
}

// ServeHTTP proxies the request to its function.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fn, path, ok := g.Route(r)
	if !ok {
		http.Error(w, "no function in the request: use /{namespace}/{function}/path", http.StatusNotFound)
		return
	}
	// Asked before whether the Function exists: a caller learns nothing
	// of a namespace it may not call.
	if g.access != nil {
		// The permission for every Function of the namespace first: its
		// decision is cached per caller and namespace, so that the first
		// request for a Function at zero, on the wake's path, waits for no
		// SubjectAccessReview of its own; a caller granted some Functions
		// only (resourceNames) is then asked for this one.
		a := Invoke
		a.Namespace = fn.Namespace
		err := g.access.Allow(r, a)
		if err != nil && !errors.Is(err, auth.ErrUnauthenticated) && !errors.Is(err, auth.ErrTooManyChecks) {
			a.Name = fn.Name
			err = g.access.Allow(r, a)
		}
		if err != nil {
			code := auth.Status(err)
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "1")
			}
			http.Error(w, err.Error(), code)
			return
		}
	}
	g.forward(w, r, fn, forwardPath{path: path, escaped: escapedTail(r, path)})
}

// forward proxies r to path of function fn, holding it while fn has no
// ready backend; the caller decided r may call fn.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, fn types.NamespacedName, path forwardPath) {
	if !g.backends.Known(fn.Namespace, fn.Name) {
		failed(w, r, fmt.Sprintf("no function %s", fn), http.StatusNotFound)
		return
	}
	start := time.Now()
	m := g.seriesOf(fn, start)
	g.begin(fn, m)
	defer g.end(fn, m)

	cold := false
	ready, changed := g.backends.Ready(fn.Namespace, fn.Name)
	if !ready {
		cold = true
		if wk, ok := g.backends.(Waker); ok {
			wk.Wake(fn.Namespace, fn.Name)
		}
		if err := g.hold(r, fn, changed); err != nil {
			m.timeouts.Inc()
			g.unavailable(w, r, fmt.Sprintf("function %s has no ready backend yet (%v); try again", fn, err))
			return
		}
	}
	addr, err := g.backends.Pick(fn.Namespace, fn.Name)
	if err != nil {
		g.unavailable(w, r, fmt.Sprintf("function %s: %v", fn, err))
		return
	}
	if cold {
		m.coldStarts.Inc()
	}
	w.Header().Set(ColdStartHeader, strconv.FormatBool(cold))
	m.requests.Inc()
	g.proxyTo(w, r, fn.Namespace, addr, path)
	m.duration.Observe(time.Since(start).Seconds())
}

// unavailable answers r 503 with msg and Config.RetryAfter.
func (g *Gateway) unavailable(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(g.cfg.RetryAfter.Seconds())))
	failed(w, r, msg, http.StatusServiceUnavailable)
}

// proxyTo proxies r to path at addr (host:port), a backend of namespace,
// unless the namespace has all its requests in flight (429).
func (g *Gateway) proxyTo(w http.ResponseWriter, r *http.Request, namespace, addr string, path forwardPath) {
	if !g.passing.TryEnter(namespace) {
		w.Header().Set("Retry-After", "1")
		failed(w, r, fmt.Sprintf("namespace %s has %d requests in flight through the gateway, its most at once; try again", namespace, g.cfg.MaxInFlightPerNamespace), http.StatusTooManyRequests)
		return
	}
	defer g.passing.Leave(namespace)
	ctx := context.WithValue(r.Context(), targetKey{}, &url.URL{Scheme: "http", Host: addr})
	ctx = context.WithValue(ctx, pathKey{}, path)
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}
