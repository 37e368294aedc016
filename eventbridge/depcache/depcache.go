package depcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Defaults of Config.
const (
	// DefaultMaxObjectBytes bounds one object: 64 MiB, a large
	// node_modules compressed.
	DefaultMaxObjectBytes = 64 << 20
	// DefaultNamespaceShares makes a namespace's quota a 32nd of the
	// bucket (64 MiB of the default 2 GiB, one largest object): 32
	// namespaces at their quota fill it, where 8 did with a quota of 256
	// MiB.
	DefaultNamespaceShares = 32
	// DefaultMaxNamespaceUploads is how many uploads one namespace takes
	// at once on one server: 1 of DefaultMaxUploads.
	DefaultMaxNamespaceUploads = 1
	// DefaultMaxUploads is how many uploads one server takes at once.
	DefaultMaxUploads = 4
	// DefaultUploadTimeout bounds one upload, from its headers read to
	// its object stored: 64 MiB at about 1 MiB/s.
	DefaultUploadTimeout = time.Minute
	// DefaultMaxNamespaceObjects bounds the objects one namespace stores:
	// 64 dependency sets, its Functions' distinct ones and a few past ones.
	DefaultMaxNamespaceObjects = 64
	// DefaultMaxIdle is how long an object no pod read is kept: 3 days,
	// a long weekend of a Function at zero.
	DefaultMaxIdle = 72 * time.Hour
)

// ContentType is the type of every object: a gzip-compressed tar.
const ContentType = "application/gzip"

// ErrInvalidConfig is wrapped by the errors of Config.Validate and of
// New's options.
var ErrInvalidConfig = errors.New("invalid dependency cache configuration")

// Config bounds the cache; DefaultConfig has working values.
type Config struct {
	// MaxObjectBytes bounds one object's size, counted as its body
	// streams in: past it the upload is cut and answered 413, nothing
	// stored.
	MaxObjectBytes int64
	// MaxNamespaceBytes bounds the bytes of the objects one namespace
	// stores: an upload that would pass it is answered 507, nothing
	// stored. 0 (the default): a NamespaceShares-th of the bucket. A namespace's usage is the sum of its objects' sizes in the
	// index (Run: a watch of the bucket, so right across the event
	// bridge's replicas, never a listing of the bucket), plus the bytes of
	// the namespace's other uploads under way on the same server; uploads
	// under way on other replicas at the same moment are not seen, so a
	// namespace may pass it by what they carry.
	MaxNamespaceBytes int64
	// MaxUploads is how many uploads one server takes at once; more are
	// answered 429 at once.
	MaxUploads int
	// UploadTimeout bounds one upload, reading its body included: a body
	// slower than that is cut (408), nothing stored.
	UploadTimeout time.Duration
	// MaxNamespaceObjects bounds how many objects one namespace stores
	// (right across the replicas, as MaxNamespaceBytes): an upload past it
	// is answered 507, nothing stored.
	MaxNamespaceObjects int
	// NamespaceShares makes MaxNamespaceBytes, when it is 0, the bucket's
	// size divided by it (2 GiB when the bucket is unlimited): so many
	// namespaces at their quota fill the bucket, never fewer.
	NamespaceShares int
	// MaxNamespaceUploads is how many of MaxUploads one namespace takes
	// at once on one server; more are answered 429 at once, so that a
	// namespace's slow uploads leave the others' slots free.
	MaxNamespaceUploads int
	// MaxIdle is how long an object no pod read is kept: then it is
	// removed (within MaxIdle/16, at most 10 minutes, by every replica),
	// so that the dependency sets no Function of the namespace uses any
	// more leave its quota, and a bad first write does not stay. A read
	// keeps an object (recorded at most every MaxIdle/4); the bucket's
	// max age (stream.Config.DependencyMaxAge) still bounds its life.
	MaxIdle time.Duration
}

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{MaxObjectBytes: DefaultMaxObjectBytes, NamespaceShares: DefaultNamespaceShares,
		MaxUploads: DefaultMaxUploads, MaxNamespaceUploads: DefaultMaxNamespaceUploads, UploadTimeout: DefaultUploadTimeout,
		MaxNamespaceObjects: DefaultMaxNamespaceObjects, MaxIdle: DefaultMaxIdle}
}

// Validate returns an error wrapping ErrInvalidConfig that names the
// first bad bound.
func (c Config) Validate() error {
	switch {
	case c.MaxObjectBytes < 1:
		return fmt.Errorf("%w: the object bound must be positive, not %d", ErrInvalidConfig, c.MaxObjectBytes)
	case c.MaxNamespaceBytes < 0:
		return fmt.Errorf("%w: the namespace quota must be positive, or 0 for a share of the bucket, not %d", ErrInvalidConfig, c.MaxNamespaceBytes)
	case c.NamespaceShares < 1:
		return fmt.Errorf("%w: the bucket's shares must be at least 1, not %d", ErrInvalidConfig, c.NamespaceShares)
	case c.MaxNamespaceUploads < 1:
		return fmt.Errorf("%w: a namespace's uploads at once must be at least 1, not %d", ErrInvalidConfig, c.MaxNamespaceUploads)
	case c.MaxUploads < 1:
		return fmt.Errorf("%w: uploads at once must be at least 1, not %d", ErrInvalidConfig, c.MaxUploads)
	case c.UploadTimeout <= 0:
		return fmt.Errorf("%w: the upload timeout must be positive, not %s", ErrInvalidConfig, c.UploadTimeout)
	case c.MaxNamespaceObjects < 1:
		return fmt.Errorf("%w: a namespace's objects must be at least 1, not %d", ErrInvalidConfig, c.MaxNamespaceObjects)
	case c.MaxIdle <= 0:
		return fmt.Errorf("%w: the idle time must be positive, not %s", ErrInvalidConfig, c.MaxIdle)
	}
	return nil
}

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
	// reviews bounds each namespace's writer token reviews.
	reviews *namespaceRates
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

// namespaceUploads are a namespace's uploads under way on one server.
type namespaceUploads struct {
	uploads int
	bytes   atomic.Int64
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
		reviews: newNamespaceRates(namespaceUploadsPerSecond, namespaceUploadsBurst), index: newIndex()}
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
	if !c.reviews.allow(k.namespace) {
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

// get answers GET and HEAD of k.
func (c *Cache) get(w http.ResponseWriter, r *http.Request, k key) {
	ctx := r.Context()
	obs, err := c.store(ctx)
	if err != nil {
		c.unavailable(w, k, "open the bucket", err)
		return
	}
	var info *jetstream.ObjectInfo
	var body io.ReadCloser
	if r.Method == http.MethodHead {
		info, err = obs.GetInfo(ctx, k.name())
	} else {
		var res jetstream.ObjectResult
		if res, err = obs.Get(ctx, k.name()); err == nil {
			body = res
			info, err = res.Info()
			defer res.Close()
		}
	}
	if err == nil && c.expired(info, time.Now()) {
		err = jetstream.ErrObjectNotFound // its chunks are gone, or going
	}
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		http.Error(w, "no dependencies cached for "+k.runtime+"/"+k.hash+" in namespace "+k.namespace, http.StatusNotFound)
		return
	}
	if err != nil {
		c.unavailable(w, k, "read the object", err)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.FormatUint(info.Size, 10))
	w.WriteHeader(http.StatusOK)
	if body == nil {
		return
	}
	if n, err := io.Copy(w, body); err != nil {
		c.log.Warn("sending cached dependencies failed", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash, "sent", n, "size", info.Size, "error", err)
		return
	}
	c.touch(ctx, obs, info)
}

// touch records that a pod read info's object: in this server's index at
// once, and in its description (which every replica's index watches) at
// most every MaxIdle/4, so that a read object is not removed as idle.
func (c *Cache) touch(ctx context.Context, obs jetstream.ObjectStore, info *jetstream.ObjectInfo) {
	now := time.Now()
	c.index.touch(info.Name, now)
	if recorded, ok := c.index.recorded(info.Name); ok && now.Sub(recorded) < c.cfg.MaxIdle/4 {
		return
	}
	meta := info.ObjectMeta
	meta.Metadata = maps.Clone(meta.Metadata)
	if meta.Metadata == nil {
		meta.Metadata = map[string]string{}
	}
	meta.Metadata[metaRead] = now.UTC().Format(time.RFC3339Nano)
	if err := obs.UpdateMeta(ctx, info.Name, meta); err != nil {
		c.log.Warn("recording a read of cached dependencies failed: the object may be removed as idle", "object", info.Name, "error", err)
	}
}

// expired reports whether info's object was stored more than the bucket's
// max age before now: the stream drops its chunks then, and its
// description, when read since, stays a little longer.
func (c *Cache) expired(info *jetstream.ObjectInfo, now time.Time) bool {
	if c.bucket.TTL <= 0 {
		return false
	}
	stored, err := time.Parse(time.RFC3339Nano, info.Metadata[metaStored])
	if err != nil {
		stored = info.ModTime
	}
	return now.Sub(stored) > c.bucket.TTL
}

// Errors of an upload's body.
var (
	errTooLarge = errors.New("too large")
	errQuota    = errors.New("namespace quota reached")
	errNotGzip  = errors.New("not gzip")
)

// put answers PUT of k: the body stored as the object, unless it exists.
func (c *Cache) put(w http.ResponseWriter, r *http.Request, k key) {
	log := c.log.With("namespace", k.namespace, "runtime", k.runtime, "hash", k.hash)
	// An answer before the whole body was read ends the connection, rather
	// than waiting for the rest of the body to keep it.
	w.Header().Set("Connection", "close")
	if r.ContentLength > c.cfg.MaxObjectBytes {
		http.Error(w, fmt.Sprintf("the dependencies are larger than %d bytes", c.cfg.MaxObjectBytes), http.StatusRequestEntityTooLarge)
		return
	}
	ns, busy := c.claim(k)
	if busy != "" {
		w.Header().Set("Retry-After", "1")
		http.Error(w, busy, http.StatusTooManyRequests)
		return
	}
	defer c.release(k)
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("too many uploads at once (%d)", c.cfg.MaxUploads), http.StatusTooManyRequests)
		return
	}
	c.metrics.upload(1)
	defer c.metrics.upload(-1)

	deadline := time.Now().Add(c.cfg.UploadTimeout)
	// The body's reads fail past the deadline, which cuts a slow one; the
	// listener's own read timeout no longer applies.
	if err := http.NewResponseController(w).SetReadDeadline(deadline); err != nil {
		log.Debug("the listener cannot bound the upload's reads; the upload's context still does", "error", err)
	}
	// The store's work outlives a client that leaves and the read
	// deadline by cleanupGrace, so that a failed upload's chunks are
	// purged, not left behind.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), deadline.Add(cleanupGrace))
	defer cancel()
	obs, err := c.store(ctx)
	if err != nil {
		c.unavailable(w, k, "open the bucket", err)
		return
	}
	switch info, err := obs.GetInfo(ctx, k.name()); {
	case err == nil && c.expired(info, time.Now()):
		c.undo(ctx, obs, k, int64(info.Size), log) // its chunks are gone: stored again
	case err == nil:
		w.WriteHeader(http.StatusOK) // first write wins
		return
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		c.unavailable(w, k, "look for the object", err)
		return
	}
	wctx, wcancel := context.WithTimeout(ctx, syncWait)
	err = c.index.wait(wctx)
	wcancel()
	if err != nil {
		c.unavailable(w, k, "read what the bucket holds", err)
		return
	}
	u := c.index.usageOf(k.namespace)
	used := u.bytes
	if objects := u.objects + c.uploadsOf(k.namespace); objects > c.cfg.MaxNamespaceObjects {
		c.log.Info("upload refused: namespace's objects", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash,
			"objects", u.objects, "max", c.cfg.MaxNamespaceObjects)
		http.Error(w, fmt.Sprintf("namespace %s stores %d objects of dependencies (uploads under way included), and may store %d objects",
			k.namespace, objects-1, c.cfg.MaxNamespaceObjects), http.StatusInsufficientStorage)
		return
	}
	if r.ContentLength > 0 && used+r.ContentLength > c.cfg.MaxNamespaceBytes {
		c.quotaFull(w, k, used)
		return
	}
	need := r.ContentLength
	if need <= 0 {
		need = min(c.cfg.MaxObjectBytes, c.cfg.MaxNamespaceBytes-used)
	}
	c.makeRoom(ctx, obs, k, need, log)
	body := &bounded{r: r.Body, max: c.cfg.MaxObjectBytes, used: used, quota: c.cfg.MaxNamespaceBytes, ns: &ns.bytes}
	// Once stored, the object is counted by the index; failed, by
	// nothing.
	defer func() { ns.bytes.Add(-body.n) }()
	magic := make([]byte, 2)
	if _, err := io.ReadFull(body, magic); err != nil || magic[0] != 0x1f || magic[1] != 0x8b {
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errNotGzip
		}
		c.refuse(w, log, k, used, body.n, err)
		return
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: k.name(), Headers: nats.Header{"Content-Type": []string{ContentType}},
		Metadata: map[string]string{metaStored: time.Now().UTC().Format(time.RFC3339Nano)}},
		fullReads{io.MultiReader(bytes.NewReader(magic), body)})
	if err != nil {
		c.undo(ctx, obs, k, body.n, log)
		c.forget(err)
		c.refuse(w, log, k, used, body.n, err)
		return
	}
	c.index.put(info) // counted at once here, by the watch on the other replicas
	c.metrics.storedObject(info.Size)
	log.Info("dependencies stored", "bytes", info.Size, "namespaceBytes", used+int64(info.Size))
	w.WriteHeader(http.StatusCreated)
}

// makeRoom removes objects of other namespaces when the bucket has no
// room for need more bytes of k's namespace (and the uploads under way
// here): the least recently read objects of the namespaces that store more
// than a fair share of the bucket (its size divided by the namespaces that
// store objects, k's counted), none of them below it. So however many
// namespaces filled the bucket, each other namespace can still store its
// fair share. Best effort: when that is not enough, the store refuses the
// upload (507).
func (c *Cache) makeRoom(ctx context.Context, obs jetstream.ObjectStore, k key, need int64, log *slog.Logger) {
	if c.bucket.MaxBytes <= 0 {
		return
	}
	st, err := obs.Status(ctx)
	if err != nil {
		c.forget(err)
		return
	}
	// The stream's bytes count each message's headers too: 1% and a
	// description's worth more.
	need += need/100 + 4<<10 + c.inflightBytes()
	short := int64(st.Size()) + need - c.bucket.MaxBytes
	if short <= 0 {
		return
	}
	share := c.bucket.MaxBytes / int64(c.index.namespaces(k.namespace))
	for _, name := range c.index.victims(k.namespace, short, share) {
		if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			c.forget(err)
			log.Warn("making room in the full dependency bucket failed", "object", name, "error", err)
			return
		}
		c.index.remove(name)
		log.Info("dependencies removed to make room: their namespace stores more than its fair share of the full bucket",
			"object", name, "fairShare", share)
	}
}

// inflightBytes is what every upload under way here has read so far.
func (c *Cache) inflightBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, ns := range c.inflight {
		n += ns.bytes.Load()
	}
	return n
}

// cleanupGrace is how long after an upload's deadline its failure may
// still be cleaned up.
const cleanupGrace = 10 * time.Second

// undo deletes what a failed upload of sent bytes left: the object store
// purges the chunks of a failed upload, but an error that JetStream
// reports only once the object's description was written (the bucket
// full while its last chunks were stored) leaves that description, naming
// chunks that are not all there. An object of another size is another
// upload's (another event bridge's, at the same moment), and is left.
func (c *Cache) undo(ctx context.Context, obs jetstream.ObjectStore, k key, sent int64, log *slog.Logger) {
	info, err := obs.GetInfo(ctx, k.name())
	if err != nil || info.Size != uint64(sent) {
		return
	}
	if err := obs.Delete(ctx, k.name()); err != nil {
		log.Error("deleting what a failed upload left failed: the object may be incomplete", "error", err)
	}
}

// refuse answers an upload that failed after its body was read from
// (nothing is stored then: the object store purges the chunks of a failed
// upload): the status says why.
func (c *Cache) refuse(w http.ResponseWriter, log *slog.Logger, k key, used, read int64, err error) {
	var netErr interface{ Timeout() bool }
	switch {
	case errors.Is(err, errTooLarge):
		http.Error(w, fmt.Sprintf("the dependencies are larger than %d bytes", c.cfg.MaxObjectBytes), http.StatusRequestEntityTooLarge)
	case errors.Is(err, errQuota):
		c.quotaFull(w, k, used)
	case errors.Is(err, errNotGzip):
		http.Error(w, "the body must be a gzip-compressed tar ("+ContentType+")", http.StatusUnsupportedMediaType)
	case errors.Is(eventstore.Classify(err), eventstore.ErrStorageFull):
		log.Warn("the dependency bucket is full", "error", err)
		http.Error(w, "the dependency cache is full", http.StatusInsufficientStorage)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.As(err, &netErr) && netErr.Timeout():
		log.Info("upload cut: its body took longer than the upload timeout", "timeout", c.cfg.UploadTimeout, "read", read)
		http.Error(w, fmt.Sprintf("the upload took longer than %s", c.cfg.UploadTimeout), http.StatusRequestTimeout)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.Canceled):
		log.Info("upload ended early by its client", "read", read, "error", err)
		http.Error(w, "the body ended early", http.StatusBadRequest)
	default:
		c.unavailable(w, k, "store the object", err)
	}
}

// quotaFull answers 507 for a namespace's quota.
func (c *Cache) quotaFull(w http.ResponseWriter, k key, used int64) {
	c.log.Info("upload refused: namespace quota", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash,
		"namespaceBytes", used, "quota", c.cfg.MaxNamespaceBytes)
	http.Error(w, fmt.Sprintf("namespace %s stores %d bytes of dependencies, and may store %d", k.namespace, used, c.cfg.MaxNamespaceBytes),
		http.StatusInsufficientStorage)
}

// unavailable answers 503 for an error of NATS, and logs it.
func (c *Cache) unavailable(w http.ResponseWriter, k key, doing string, err error) {
	c.forget(err)
	c.log.Error("dependency cache: "+doing+" failed", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash, "error", err)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "the dependency cache is unavailable", http.StatusServiceUnavailable)
}

// claim marks k as uploading on this server and returns its namespace's
// uploads under way; or why it cannot be: k is already being uploaded
// here, or its namespace has MaxNamespaceUploads under way here.
func (c *Cache) claim(k key) (*namespaceUploads, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uploading[k.name()] {
		return nil, "an upload of these dependencies is under way"
	}
	ns := c.inflight[k.namespace]
	if ns == nil {
		ns = &namespaceUploads{}
		c.inflight[k.namespace] = ns
	}
	if ns.uploads >= c.cfg.MaxNamespaceUploads {
		return nil, fmt.Sprintf("namespace %s has %d uploads under way, as many as it may at once", k.namespace, ns.uploads)
	}
	c.uploading[k.name()] = true
	ns.uploads++
	return ns, ""
}

// uploadsOf is how many uploads of namespace are under way here.
func (c *Cache) uploadsOf(namespace string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ns := c.inflight[namespace]; ns != nil {
		return ns.uploads
	}
	return 0
}

// release ends the upload of k claimed.
func (c *Cache) release(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.uploading, k.name())
	if ns := c.inflight[k.namespace]; ns != nil {
		if ns.uploads--; ns.uploads == 0 {
			delete(c.inflight, k.namespace)
		}
	}
}

// store returns the bucket, made or updated to its configuration the
// first time and again after NATS lost it.
func (c *Cache) store(ctx context.Context) (jetstream.ObjectStore, error) {
	c.mu.Lock()
	obs := c.obs
	c.mu.Unlock()
	if obs != nil {
		return obs, nil
	}
	obs, err := c.js.CreateOrUpdateObjectStore(ctx, c.bucket)
	if err != nil {
		return nil, fmt.Errorf("create or update object store %s: %w", c.bucket.Bucket, err)
	}
	c.mu.Lock()
	c.obs = obs
	c.mu.Unlock()
	return obs, nil
}

// syncWait bounds how long an upload waits for the index to hold what the
// bucket holds (after the event bridge started, or NATS came back).
const syncWait = 10 * time.Second

// Run makes the bucket (Prepare), then, until ctx ends, keeps the index of
// what it holds from a watch of its objects' descriptions, watching again
// every retry after the watch ended, and removes the objects unread for
// MaxIdle or past the bucket's max age.
func (c *Cache) Run(ctx context.Context, retry time.Duration) {
	c.Prepare(ctx, retry)
	sweep := time.NewTicker(min(max(c.cfg.MaxIdle/16, 10*time.Millisecond), 10*time.Minute))
	defer sweep.Stop()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := c.watch(ctx, sweep.C)
		if ctx.Err() != nil {
			return
		}
		c.index.reset()
		if attempt%10 == 0 {
			c.log.Warn("watching the dependency cache's bucket ended; watching again", "bucket", c.bucket.Bucket, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// watch keeps the index from a watch of the bucket until it ends, and
// sweeps at each tick of sweep.
func (c *Cache) watch(ctx context.Context, sweep <-chan time.Time) error {
	obs, err := c.store(ctx)
	if err != nil {
		return err
	}
	c.index.reset()
	watcher, err := obs.Watch(ctx)
	if err != nil {
		c.forget(err)
		return fmt.Errorf("watch the bucket: %w", err)
	}
	defer func() { _ = watcher.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case info, ok := <-watcher.Updates():
			switch {
			case !ok:
				return errors.New("the watch of the bucket ended")
			case info == nil:
				c.index.markSynced()
			default:
				c.index.put(info)
			}
		case <-sweep:
			c.sweep(ctx, obs)
		}
	}
}

// sweep removes the objects unread for MaxIdle or past the bucket's max
// age (every replica does: a second removal finds nothing).
func (c *Cache) sweep(ctx context.Context, obs jetstream.ObjectStore) {
	for _, name := range c.index.stale(time.Now(), c.cfg.MaxIdle, c.bucket.TTL) {
		err := obs.Delete(ctx, name)
		switch {
		case err == nil:
			c.log.Info("dependencies removed: unread or expired", "object", name, "maxIdle", c.cfg.MaxIdle)
		case !errors.Is(err, jetstream.ErrObjectNotFound):
			c.forget(err)
			c.log.Warn("removing unread dependencies failed; trying again at the next sweep", "object", name, "error", err)
			continue
		}
		c.index.remove(name)
	}
}

// prepareTimeout bounds each of Prepare's attempts to make the bucket: a
// replicated bucket on a cluster just formed can take longer than the
// JetStream API's default 5 s.
const prepareTimeout = 30 * time.Second

// Prepare makes the bucket as the event bridge starts, trying again every
// retry until it exists or ctx ends, so that the first pod that asks does
// not wait for it, or fail (503) when its making outlasts the request.
// Errors are logged, the first and then one in ten.
func (c *Cache) Prepare(ctx context.Context, retry time.Duration) {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, prepareTimeout)
		_, err := c.store(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		if attempt%10 == 0 {
			c.log.Warn("making the dependency cache's bucket failed; trying again", "bucket", c.bucket.Bucket, "attempt", attempt+1, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// forget drops the bucket after an error that says NATS lost it, so that
// the next request makes it again.
func (c *Cache) forget(err error) {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		c.mu.Lock()
		c.obs = nil
		c.mu.Unlock()
	}
}

// bucketBytes is the bytes the bucket holds, -1 when it cannot be read.
func (c *Cache) bucketBytes(ctx context.Context) int64 {
	obs, err := c.store(ctx)
	if err != nil {
		return -1
	}
	st, err := obs.Status(ctx)
	if err != nil {
		c.forget(err)
		return -1
	}
	return int64(st.Size())
}

// bounded reads an upload's body, failing with errTooLarge past max bytes
// and with errQuota once used plus the bytes the namespace's uploads under
// way read (ns) pass quota.
type bounded struct {
	r           io.Reader
	max, n      int64
	used, quota int64
	ns          *atomic.Int64
}

func (b *bounded) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	inflight := b.ns.Add(int64(n))
	switch {
	case b.n > b.max:
		return n, errTooLarge
	case b.used+inflight > b.quota:
		return n, errQuota
	}
	return n, err
}

// fullReads fills each read whole, but at the end: the object store makes
// a chunk of each read, and a request body's reads are as small as the
// network's packets.
type fullReads struct{ r io.Reader }

func (f fullReads) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := f.r.Read(p[n:])
		n += m
		if err != nil {
			return n, err // io.EOF ends the object; any other error fails it
		}
	}
	return n, nil
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
