package depcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// Errors of an upload's body.
var (
	errTooLarge = errors.New("too large")
	errQuota    = errors.New("namespace quota reached")
	errNotGzip  = errors.New("not gzip")
)

// put answers PUT of k: the body stored as the object, unless it exists.
// Its steps: admit the upload (its declared size, the uploads under way
// here), bound its time, look for the object, check the namespace's quota,
// make room in the bucket, store the body.
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

	ctx, cancel := c.uploadContext(w, r, log)
	defer cancel()
	obs, err := c.store(ctx)
	if err != nil {
		c.unavailable(w, k, "open the bucket", err)
		return
	}
	if c.stored(ctx, w, obs, k, log) {
		return
	}
	used, ok := c.withinQuota(ctx, w, r, k)
	if !ok {
		return
	}
	need := r.ContentLength
	if need <= 0 {
		need = min(c.cfg.MaxObjectBytes, c.cfg.MaxNamespaceBytes-used)
	}
	c.makeRoom(ctx, obs, k, need, log)
	c.storeBody(ctx, w, r.Body, obs, k, ns, used, log)
}

// uploadContext bounds an upload to UploadTimeout: the body's reads fail
// past it, which cuts a slow one (the listener's own read timeout no
// longer applies), and the returned context, for the store's work, ends
// cleanupGrace after it, and not when the client leaves, so that a failed
// upload's chunks are purged, not left behind.
func (c *Cache) uploadContext(w http.ResponseWriter, r *http.Request, log *slog.Logger) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(c.cfg.UploadTimeout)
	if err := http.NewResponseController(w).SetReadDeadline(deadline); err != nil {
		log.Debug("the listener cannot bound the upload's reads; the upload's context still does", "error", err)
	}
	return context.WithDeadline(context.WithoutCancel(r.Context()), deadline.Add(cleanupGrace))
}

// stored looks for k in the bucket, and reports true, having answered,
// when k is not to be stored now: it is there (200: the first write wins)
// or looking for it failed (503). An object past the bucket's max age,
// whose chunks are gone, is removed first, to be stored again.
func (c *Cache) stored(ctx context.Context, w http.ResponseWriter, obs jetstream.ObjectStore, k key, log *slog.Logger) bool {
	switch info, err := obs.GetInfo(ctx, k.name()); {
	case err == nil && c.expired(info, time.Now()):
		c.undo(ctx, obs, k, int64(info.Size), log) // its chunks are gone: stored again
	case err == nil:
		w.WriteHeader(http.StatusOK) // first write wins
		return true
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		c.unavailable(w, k, "look for the object", err)
		return true
	}
	return false
}

// withinQuota returns the bytes k's namespace stores (once the index holds
// what the bucket holds, waiting at most syncWait), and whether one more
// object of r's declared length fits its quota: when it does not (507), or
// the index cannot be had (503), it has answered.
func (c *Cache) withinQuota(ctx context.Context, w http.ResponseWriter, r *http.Request, k key) (int64, bool) {
	wctx, wcancel := context.WithTimeout(ctx, syncWait)
	err := c.index.wait(wctx)
	wcancel()
	if err != nil {
		c.unavailable(w, k, "read what the bucket holds", err)
		return 0, false
	}
	u := c.index.usageOf(k.namespace)
	used := u.bytes
	if objects := u.objects + c.uploadsOf(k.namespace); objects > c.cfg.MaxNamespaceObjects {
		c.log.Info("upload refused: namespace's objects", "namespace", k.namespace, "runtime", k.runtime, "hash", k.hash,
			"objects", u.objects, "max", c.cfg.MaxNamespaceObjects)
		http.Error(w, fmt.Sprintf("namespace %s stores %d objects of dependencies (uploads under way included), and may store %d objects",
			k.namespace, objects-1, c.cfg.MaxNamespaceObjects), http.StatusInsufficientStorage)
		return 0, false
	}
	if r.ContentLength > 0 && used+r.ContentLength > c.cfg.MaxNamespaceBytes {
		c.quotaFull(w, k, used)
		return 0, false
	}
	return used, true
}

// storeBody stores the upload's body r as k's object, read within the
// object's bound and the namespace's quota (its used bytes and the bytes
// of its uploads under way here, ns), and answers 201, or why it was
// refused (refuse).
func (c *Cache) storeBody(ctx context.Context, w http.ResponseWriter, r io.Reader, obs jetstream.ObjectStore, k key, ns *namespaceUploads, used int64, log *slog.Logger) {
	body := &bounded{r: r, max: c.cfg.MaxObjectBytes, used: used, quota: c.cfg.MaxNamespaceBytes, ns: &ns.bytes}
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

// syncWait bounds how long an upload waits for the index to hold what the
// bucket holds (after the event bridge started, or NATS came back).
const syncWait = 10 * time.Second

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
