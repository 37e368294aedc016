package depcache

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/ratelimit"
	"github.com/kfn-dev/kfn/internal/seats"
)

// ContentType is the type of every object: a gzip-compressed tar.
const ContentType = "application/gzip"

// Senders tells the namespace of the ServiceAccount whose bearer token a
// request carries: "" without one or for a caller that is no
// ServiceAccount, an error for a token the cluster does not know, and
// auth.ErrTooManyReviews past the rate of new tokens' reviews.
// *auth.Kubernetes implements it (the publisher's senders).
type Senders interface {
	SenderNamespace(r *http.Request) (string, error)
}

// Option configures a Cache.
type Option func(*Cache) error

// WithLogger sets the logger (default: none).
func WithLogger(l *slog.Logger) Option {
	return func(c *Cache) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidConfig)
		}
		c.log = l
		return nil
	}
}

// WithMetrics registers the cache's metrics with reg (see newMetrics).
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *Cache) error {
		if reg == nil {
			return fmt.Errorf("%w: nil registerer", ErrInvalidConfig)
		}
		m, err := newMetrics(reg, c)
		if err != nil {
			return fmt.Errorf("register the dependency cache's metrics: %w", err)
		}
		c.metrics = m
		return nil
	}
}

// Cache serves the dependency cache (package doc) over HTTP. It is safe
// for concurrent use.
type Cache struct {
	js      jetstream.JetStream
	bucket  jetstream.ObjectStoreConfig
	senders Senders
	writers Writers
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	// slots holds a token per upload under way (MaxUploads).
	slots chan struct{}
	// downloads are the downloads under way, a seat each (MaxDownloads,
	// and MaxNamespaceDownloads a namespace).
	downloads *seats.Gate
	// reviews bounds each namespace's writer token reviews.
	reviews *ratelimit.PerKey
	// index is what the bucket holds, by namespace (Run keeps it).
	index *index

	mu sync.Mutex
	// obs is the bucket, once made or opened; nil after NATS lost it.
	obs jetstream.ObjectStore
	// uploading are the objects being uploaded on this server.
	uploading map[string]bool
	// inflight are the bytes each namespace's uploads under way on this
	// server have read so far.
	inflight map[string]*namespaceUploads
}

// New returns a cache that keeps its objects in the object store bucket
// describes (stream.Config.DependencyBucketConfig), made or updated when
// first needed, learns each caller's namespace from senders, and lets
// store an object only the install step that writers confirms for it.
func New(js jetstream.JetStream, bucket jetstream.ObjectStoreConfig, senders Senders, writers Writers, cfg Config, opts ...Option) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil || senders == nil || writers == nil || bucket.Bucket == "" {
		return nil, fmt.Errorf("%w: JetStream, senders, writers and a bucket name are required", ErrInvalidConfig)
	}
	if cfg.MaxNamespaceBytes == 0 {
		size := bucket.MaxBytes
		if size <= 0 {
			size = stream.DefaultDependencyMaxBytes
		}
		cfg.MaxNamespaceBytes = max(1, size/int64(cfg.NamespaceShares))
	}
	c := &Cache{js: js, bucket: bucket, senders: senders, writers: writers, cfg: cfg, log: slog.New(slog.DiscardHandler),
		slots: make(chan struct{}, cfg.MaxUploads), uploading: map[string]bool{}, inflight: map[string]*namespaceUploads{},
		downloads: seats.New(cfg.MaxNamespaceDownloads, seats.WithTotal(cfg.MaxDownloads)),
		reviews:   ratelimit.NewPerKey(namespaceUploadsPerSecond, namespaceUploadsBurst), index: newIndex()}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Off answers every request of the cache's routes 404 with reason: the
// pods then install their dependencies as without a cache. An event bridge
// serves it when it cannot tell a caller's namespace (no senders).
func Off(reason string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the dependency cache is off: "+reason, http.StatusNotFound)
	})
}

// ServeHTTP serves the routes of the package doc.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := strings.ToLower(r.Method)
	rec := &recorder{ResponseWriter: w}
	defer func() { c.metrics.request(route, rec.code()) }()
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut:
	default:
		route = "other"
		rec.Header().Set("Allow", "GET, HEAD, PUT")
		http.Error(rec, "method not allowed: GET, HEAD or PUT", http.StatusMethodNotAllowed)
		return
	}
	namespace, err := c.senders.SenderNamespace(r)
	switch {
	case errors.Is(err, auth.ErrTooManyReviews):
		rec.Header().Set("Retry-After", "1")
		http.Error(rec, err.Error(), http.StatusTooManyRequests)
		return
	case err != nil || namespace == "":
		reason := "send the pod's ServiceAccount token (Authorization: Bearer)"
		if err != nil {
			reason = err.Error()
		} else if r.Header.Get("Authorization") != "" {
			reason = "the token is not a ServiceAccount's"
		}
		rec.Header().Set("WWW-Authenticate", `Bearer realm="kfn"`)
		http.Error(rec, "unauthenticated: "+reason, http.StatusUnauthorized)
		return
	}
	runtime, hash, err := parseKey(r.URL.EscapedPath())
	if err != nil {
		http.Error(rec, err.Error(), http.StatusBadRequest)
		return
	}
	k := key{namespace: namespace, runtime: runtime, hash: hash}
	switch r.Method {
	case http.MethodPut:
		if !c.writer(rec, r, k) {
			return
		}
		c.put(rec, r, k)
	default:
		c.get(rec, r, k)
	}
}

// writer reports whether r may store k: it carries, beside the identity of
// k's namespace, the writer token of the install step of a pod of that
// namespace whose dependency set is k's (WriterAudience).
// Else it answers 403 (429 past the namespace's rate of writer reviews, 503
// when the cluster cannot be asked) and returns false.
func (c *Cache) writer(w http.ResponseWriter, r *http.Request, k key) bool {
	token := strings.TrimSpace(r.Header.Get(WriterHeader))
	r.Header.Del(WriterHeader)
	if token == "" {
		http.Error(w, "forbidden: only the install step of a Function's pod stores dependencies, with its writer token in "+
			WriterHeader, http.StatusForbidden)
		return false
	}
	if !c.reviews.Allow(k.namespace) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("namespace %s sends more than %g uploads a second", k.namespace, namespaceUploadsPerSecond), http.StatusTooManyRequests)
		return false
	}
	ns, err := c.writers.WriterNamespace(r.Context(), token, WriterAudience(k.runtime, k.hash))
	switch {
	case errors.Is(err, ErrNotAWriter):
		http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
		return false
	case err != nil:
		c.log.Error("dependency cache: reviewing a writer token failed", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash, "error", err)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the writer token cannot be checked now", http.StatusServiceUnavailable)
		return false
	case ns != k.namespace:
		http.Error(w, fmt.Sprintf("forbidden: the writer token is of namespace %s, the identity of %s", ns, k.namespace), http.StatusForbidden)
		return false
	}
	return true
}

// unavailable answers 503 for an error of NATS, and logs it.
func (c *Cache) unavailable(w http.ResponseWriter, k key, doing string, err error) {
	c.forget(err)
	c.log.Error("dependency cache: "+doing+" failed", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash, "error", err)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "the dependency cache is unavailable", http.StatusServiceUnavailable)
}

// recorder remembers the status a handler answered.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// code is the status answered (200 when nothing was written).
func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
