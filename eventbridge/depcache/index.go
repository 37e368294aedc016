package depcache

import (
	"context"
	"maps"
	"slices"
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
	// stored is when it was stored, used when it was last stored or read
	// (here, or as its description says), recorded when its description
	// says it was.
	stored, used, recorded time.Time
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
	if info.Deleted {
		x.removeLocked(info.Name)
		return
	}
	namespace, _, _ := strings.Cut(info.Name, "/")
	prev, had := x.objects[info.Name]
	x.removeLocked(info.Name)
	o := object{namespace: namespace, size: int64(info.Size), stored: info.ModTime}
	if t, err := time.Parse(time.RFC3339Nano, info.Metadata[metaStored]); err == nil {
		o.stored = t
	}
	o.used = o.stored
	if t, err := time.Parse(time.RFC3339Nano, info.Metadata[metaRead]); err == nil && t.After(o.used) {
		o.used = t
	}
	o.recorded = o.used
	if had && prev.used.After(o.used) {
		o.used = prev.used // read here since
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

// recorded is when the description of the object name last recorded its
// use; false when the index does not hold it.
func (x *index) recorded(name string) (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	o, ok := x.objects[name]
	return o.recorded, ok
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

// victims are the objects to remove, least recently used first, so that
// need bytes are freed from the namespaces other than namespace that store
// more than share bytes, none of them below share: what a full bucket gives
// up for namespace's upload. Fewer when those do not hold enough.
func (x *index) victims(namespace string, need, share int64) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var candidates []string
	for name, o := range x.objects {
		if o.namespace != namespace && x.usage[o.namespace].bytes > share {
			candidates = append(candidates, name)
		}
	}
	slices.SortFunc(candidates, func(a, b string) int { return x.objects[a].used.Compare(x.objects[b].used) })
	left := maps.Clone(x.usage)
	var out []string
	for _, name := range candidates {
		if need <= 0 {
			break
		}
		o := x.objects[name]
		u := left[o.namespace]
		if u.bytes <= share {
			continue
		}
		u.bytes -= o.size
		left[o.namespace] = u
		need -= o.size
		out = append(out, name)
	}
	return out
}

// namespaces is how many namespaces store objects, namespace counted.
func (x *index) namespaces(namespace string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.usage)
	if _, ok := x.usage[namespace]; !ok {
		n++
	}
	return n
}
