package delivery

import (
	"context"
	"fmt"
	"sync"
)

// inFlight bounds the requests in flight to sinks: at most perNamespace
// for the Subscriptions of one namespace, and total for all. A request in
// flight holds a connection, a goroutine and its buffers until its sink
// answers or its timeout; a namespace's Subscriptions may each have up to
// 1,000 in flight, so that without a bound of its own one namespace's
// sinks that never answer hold the dispatcher's descriptors and memory.
// A request past a bound waits (within its context) for one to end; when
// one ends, the next goes to the namespace with a request waiting that
// has the fewest in flight (in the order its own asked), so that
// namespaces at their bound together wait behind the others. Safe for
// concurrent use; a nil *inFlight bounds nothing.
type inFlight struct {
	total, perNamespace int

	mu      sync.Mutex
	used    int
	byNS    map[string]int
	waiting map[string][]chan struct{}
}

// newInFlight returns the bound of total requests in flight, perNamespace
// for one namespace; nil, no bound, when total is 0 or less. A
// perNamespace of 0 or less, or above total, is total.
func newInFlight(total, perNamespace int) *inFlight {
	if total <= 0 {
		return nil
	}
	if perNamespace <= 0 || perNamespace > total {
		perNamespace = total
	}
	return &inFlight{total: total, perNamespace: perNamespace, byNS: map[string]int{}, waiting: map[string][]chan struct{}{}}
}

// acquire takes a request in flight for namespace, waiting for one until
// ctx ends: then it takes none and returns an error that says which bound
// held it, wrapping ctx's.
func (f *inFlight) acquire(ctx context.Context, namespace string) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	if f.used < f.total && f.byNS[namespace] < f.perNamespace && len(f.waiting[namespace]) == 0 {
		f.take(namespace)
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	f.waiting[namespace] = append(f.waiting[namespace], ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.waiting[namespace]
	for i, w := range q {
		if w == ch {
			f.setWaiting(namespace, append(q[:i:i], q[i+1:]...))
			return f.heldBy(namespace, ctx.Err())
		}
	}
	// Granted as ctx ended: give it on.
	f.releaseLocked(namespace)
	return f.heldBy(namespace, ctx.Err())
}

// heldBy says which bound kept a request waiting. f.mu is held.
func (f *inFlight) heldBy(namespace string, err error) error {
	if f.byNS[namespace] >= f.perNamespace {
		return fmt.Errorf("namespace %s has %d deliveries in flight, its bound, and none ended in time: %w", namespace, f.byNS[namespace], err)
	}
	return fmt.Errorf("the dispatcher has %d deliveries in flight, its bound, and none was free for namespace %s in time: %w", f.used, namespace, err)
}

// release ends a request in flight of namespace: the next waiting goes.
func (f *inFlight) release(namespace string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked(namespace)
}

func (f *inFlight) releaseLocked(namespace string) {
	f.used--
	if f.byNS[namespace]--; f.byNS[namespace] <= 0 {
		delete(f.byNS, namespace)
	}
	for f.used < f.total {
		next, ok := f.fewest()
		if !ok {
			return
		}
		q := f.waiting[next]
		ch := q[0]
		q[0] = nil
		f.setWaiting(next, q[1:])
		f.take(next)
		close(ch)
	}
}

// fewest is the namespace with a request waiting and room under its own
// bound that has the fewest in flight. f.mu is held.
func (f *inFlight) fewest() (string, bool) {
	best, found := "", false
	for ns := range f.waiting {
		n := f.byNS[ns]
		if n >= f.perNamespace {
			continue
		}
		if !found || n < f.byNS[best] || n == f.byNS[best] && ns < best {
			best, found = ns, true
		}
	}
	return best, found
}

func (f *inFlight) take(namespace string) {
	f.used++
	f.byNS[namespace]++
}

func (f *inFlight) setWaiting(namespace string, q []chan struct{}) {
	if len(q) == 0 {
		delete(f.waiting, namespace)
		return
	}
	f.waiting[namespace] = q
}
