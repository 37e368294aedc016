package depcache

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Metadata of every object, set when it is stored and when it is read:
// RFC 3339 times, in every replica's view of the bucket (its watch).
const (
	// metaStored is when the object was stored: it expires its bucket's
	// max age after (the stream's own age counts from then too).
	metaStored = "kfn-stored"
	// metaRead is when a pod last read it (at most every MaxIdle/4).
	metaRead = "kfn-read"
)

// index is what the bucket holds, by namespace, as one replica learns it
// from a watch of the bucket's object descriptions (Cache.Run): what every
// replica stores and removes, so that a namespace's usage is known without
// listing the bucket. It is safe for concurrent use.
type index struct {
	mu sync.Mutex
	// synced is closed once the watch delivered what the bucket held.
	synced  chan struct{}
	objects map[string]object
	usage   map[string]usage
}

// object is what the index keeps of one object.
type object struct {
	namespace string
	size      int64
	// stored is when it was stored, used when it was last stored or read.
	stored, used time.Time
}

// usage is what a namespace stores.
type usage struct {
	bytes   int64
	objects int
}

func newIndex() *index {
	return &index{synced: make(chan struct{}), objects: map[string]object{}, usage: map[string]usage{}}
}

// reset forgets everything, until the watch delivers the bucket again.
func (x *index) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	select {
	case <-x.synced:
		x.synced = make(chan struct{})
	default:
	}
	x.objects, x.usage = map[string]object{}, map[string]usage{}
}

// markSynced says the watch delivered what the bucket held.
func (x *index) markSynced() {
	x.mu.Lock()
	defer x.mu.Unlock()
	select {
	case <-x.synced:
	default:
		close(x.synced)
	}
}

// wait returns once the index is synced, or ctx's error.
func (x *index) wait(ctx context.Context) error {
	x.mu.Lock()
	synced := x.synced
	x.mu.Unlock()
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// put records info (an object stored, read or deleted).
func (x *index) put(info *jetstream.ObjectInfo) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(info.Name)
	if info.Deleted {
		return
	}
	namespace, _, _ := strings.Cut(info.Name, "/")
	o := object{namespace: namespace, size: int64(info.Size), stored: info.ModTime}
	if t, err := time.Parse(time.RFC3339Nano, info.Metadata[metaStored]); err == nil {
		o.stored = t
	}
	o.used = o.stored
	if t, err := time.Parse(time.RFC3339Nano, info.Metadata[metaRead]); err == nil && t.After(o.used) {
		o.used = t
	}
	x.objects[info.Name] = o
	u := x.usage[namespace]
	u.bytes += o.size
	u.objects++
	x.usage[namespace] = u
}

// remove forgets the object name.
func (x *index) remove(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(name)
}

func (x *index) removeLocked(name string) {
	o, ok := x.objects[name]
	if !ok {
		return
	}
	delete(x.objects, name)
	u := x.usage[o.namespace]
	u.bytes -= o.size
	u.objects--
	if u.objects <= 0 {
		delete(x.usage, o.namespace)
		return
	}
	x.usage[o.namespace] = u
}

// usageOf is what namespace stores.
func (x *index) usageOf(namespace string) usage {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.usage[namespace]
}

// used is when the object name was last stored or read; false when the
// index does not hold it.
func (x *index) used(name string) (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	o, ok := x.objects[name]
	return o.used, ok
}

// touch records that name was read at t.
func (x *index) touch(name string, t time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if o, ok := x.objects[name]; ok && t.After(o.used) {
		o.used = t
		x.objects[name] = o
	}
}

// stale are the objects unread for maxIdle (0: none) or stored maxAge ago
// (0: none) at now.
func (x *index) stale(now time.Time, maxIdle, maxAge time.Duration) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for name, o := range x.objects {
		if maxIdle > 0 && now.Sub(o.used) > maxIdle || maxAge > 0 && now.Sub(o.stored) > maxAge {
			out = append(out, name)
		}
	}
	return out
}
