package depcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
	// The watch says it delivered the bucket's history (a nil update) when
	// its first look found no description, or with the description it
	// delivered last: a look that failed on an empty bucket (its election
	// under way), or descriptions that expired between the look and the
	// watch, leave it unsaid, and every upload waiting for it for as long
	// as the watch lasts. Until it is said, the bucket is looked at every
	// syncCheck: with no description left, there is nothing to wait for.
	check := time.NewTicker(syncCheck)
	defer check.Stop()
	checks := check.C
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
				checks = nil
			default:
				c.index.put(info)
			}
		case <-checks:
			if c.noDescriptions(ctx) {
				c.index.markSynced()
				checks = nil
			}
		case <-sweep:
			c.sweep(ctx, obs)
		}
	}
}

// syncCheck is how often an index not yet synced looks at the bucket.
const syncCheck = time.Second

// noDescriptions says whether the bucket holds no object's description
// (the stream and subjects of JetStream's object stores, ADR-20); a
// failure to look says no.
func (c *Cache) noDescriptions(ctx context.Context) bool {
	s, err := c.js.Stream(ctx, "OBJ_"+c.bucket.Bucket)
	if err != nil {
		return false
	}
	_, err = s.GetLastMsgForSubject(ctx, "$O."+c.bucket.Bucket+".M.>")
	return errors.Is(err, jetstream.ErrMsgNotFound)
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
