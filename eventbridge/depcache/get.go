package depcache

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// get answers GET and HEAD of k. A GET takes one of the downloads' slots
// (429 past its namespace's or the server's bound) and is bounded by
// DownloadTimeout, each of its writes by DownloadWriteTimeout (send).
func (c *Cache) get(w http.ResponseWriter, r *http.Request, k key) {
	ctx := r.Context()
	var end time.Time
	if r.Method == http.MethodGet {
		if busy := c.claimDownload(k.namespace); busy != "" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, busy, http.StatusTooManyRequests)
			return
		}
		c.metrics.download(1)
		defer c.metrics.download(-1)
		defer c.downloads.Leave(k.namespace) // before the gauge drops: at 0, every slot is free
		// The object store ends its reads at the context's deadline
		// (JetStream's default timeout, 5 s, without one), and not when
		// it is cancelled: a read blocks until the deadline once the
		// consumer stopped at the cancel. So the download's context does
		// not end when the client leaves; its next write fails then (or
		// at the write timeout), which ends the download.
		end = time.Now().Add(c.cfg.DownloadTimeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), end)
		defer cancel()
	}
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
			defer res.Close() // ends its consumer, and drops what NATS sent ahead
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
	if n, err := c.send(w, body, end); err != nil {
		log := c.log.With("namespace", k.namespace, "runtime", k.runtime, "hash", k.hash, "sent", n, "size", info.Size, "error", err)
		switch {
		case errors.Is(err, errStalled), errors.Is(err, errWrite) && errors.Is(err, os.ErrDeadlineExceeded):
			log.Info("download ended: its client took nothing for the write timeout, or was not done within the download timeout",
				"writeTimeout", c.cfg.DownloadWriteTimeout, "timeout", c.cfg.DownloadTimeout)
		case errors.Is(err, errWrite):
			log.Info("download ended by its client")
		default:
			log.Warn("sending cached dependencies failed")
		}
		return
	}
	c.touch(r.Context(), obs, info)
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
