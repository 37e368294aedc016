package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/internal/jsstream"
)

// holder names this process in the locks it holds, for whoever inspects
// the bucket.
var holder = func() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
}()

// lock takes the consumer's lock, waiting while another holds it, until ctx
// ends. A lock whose holder died expires after stream.LockTTL. The lock
// bucket is made when it is missing (NATS lost it). The returned unlock
// never fails: a lock it cannot delete expires.
func (f Filters) lock(ctx context.Context, consumer string) (unlock func(), err error) {
	kv, err := f.JetStream.KeyValue(ctx, f.Streams.LockBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if err = jsstream.EnsureLockBucket(ctx, f.JetStream, f.Streams); err == nil {
			kv, err = f.JetStream.KeyValue(ctx, f.Streams.LockBucket())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open lock bucket %s: %w", f.Streams.LockBucket(), err)
	}
	wait := 2 * time.Millisecond
	for {
		rev, err := kv.Create(ctx, consumer, []byte(holder))
		if err == nil {
			return func() {
				// The caller's ctx may have ended; the lock should still go.
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				_ = kv.Delete(ctx, consumer, jetstream.LastRevision(rev))
			}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("lock consumer %s: %w", consumer, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock consumer %s: held by another (it expires %s after it was taken): %w", consumer, stream.LockTTL, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
