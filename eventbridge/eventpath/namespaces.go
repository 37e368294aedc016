package eventpath

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// Defaults of NewNamespaces.
const (
	// DefaultEventsPerNamespace is how many events each namespace's
	// record keeps.
	DefaultEventsPerNamespace = 250
	// DefaultNamespaces is how many namespaces are recorded at once: the
	// ones least recently recorded give way to new ones. A full record
	// of DefaultEventsPerNamespace events, each delivered to two
	// Subscriptions, holds about 190 KB (BenchmarkNamespaceRecordMemory):
	// all of them together about 24 MB, of the event bridge's 512 MiB.
	DefaultNamespaces = 128
)

// Namespaces records the recent events' paths of each namespace apart, as
// the event bridge of a cluster keeps them for kfn trace: a namespace's
// record holds the events its senders stored (the sender's namespace of
// sender identity) and the deliveries to its own Subscriptions, never
// another namespace's deliveries, and each namespace keeps its own most
// recent events, so that one namespace's traffic cannot push another's out.
// Feed it with Follow and as the dispatcher's Observer; read it with Find.
// Safe for concurrent use.
type Namespaces struct {
	perNamespace, namespaces int

	mu   sync.Mutex
	byNS map[string]*namespaceRecord
}

// namespaceRecord is one namespace's Recorder and when it last recorded.
type namespaceRecord struct {
	r    *Recorder
	used time.Time
}

var _ dispatcher.Observer = (*Namespaces)(nil)

// NewNamespaces returns a Namespaces that keeps perNamespace events of each
// of at most namespaces namespaces (the defaults for 0). The error is for
// a negative bound.
func NewNamespaces(perNamespace, namespaces int) (*Namespaces, error) {
	if perNamespace < 0 || namespaces < 0 {
		return nil, fmt.Errorf("eventpath: the events per namespace (%d) and the namespaces (%d) kept must not be negative", perNamespace, namespaces)
	}
	if perNamespace == 0 {
		perNamespace = DefaultEventsPerNamespace
	}
	if namespaces == 0 {
		namespaces = DefaultNamespaces
	}
	return &Namespaces{perNamespace: perNamespace, namespaces: namespaces, byNS: map[string]*namespaceRecord{}}, nil
}

// Bound is how many events each namespace's record keeps.
func (n *Namespaces) Bound() int { return n.perNamespace }

// Observe records a delivery step in the record of the Subscription's
// namespace; it implements dispatcher.Observer.
func (n *Namespaces) Observe(s dispatcher.Step) {
	if r := n.recorder(s.Namespace, true); r != nil {
		r.Observe(s)
	}
}

// Follow records every event stored in the stream named streamName from
// now on (headers only) in the record of its sender's namespace; an event
// without one (published without sender identity) is recorded only where
// it is delivered. It stops when stop is called or ctx ends. Store records
// the publisher's events without a consumer of the stream.
func (n *Namespaces) Follow(ctx context.Context, js jetstream.JetStream, streamName string) (stop func(), err error) {
	return follow(ctx, js, streamName, n.stored)
}

// Store wraps the publisher's event store: each event it stores (not a
// duplicate) is recorded in the record of its sender's namespace, as
// Follow would, but without reading the stream again (a consumer of the
// event stream costs every event's acknowledgement). Events stored by
// others (the dispatcher's replies, replays) are recorded where they are
// delivered.
func (n *Namespaces) Store(next publisher.EventStore) publisher.EventStore {
	return storeRecorder{next: next, record: n.stored}
}

// stored records s in the record of its sender's namespace.
func (n *Namespaces) stored(s storedEvent) {
	if r := n.recorder(s.senderNamespace, true); r != nil {
		r.stored(s.key, s.at, s.subject, s.event, s.traceParent)
	}
}

// storeRecorder is the event store of Namespaces.Store and Replicas.Store.
type storeRecorder struct {
	next   publisher.EventStore
	record func(storedEvent)
}

var _ publisher.EventStore = storeRecorder{}

// Put implements publisher.EventStore.
func (s storeRecorder) Put(ctx context.Context, e eventstore.Event) (eventstore.Result, error) {
	res, err := s.next.Put(ctx, e)
	if err != nil || res.Duplicate {
		return res, err
	}
	sender := e.Attribute(eventstore.SenderExtension)
	if sender == "" {
		return res, nil // recorded where it is delivered
	}
	tp, _ := e.TraceContext()
	s.record(storedEvent{key: eventKey{res.Stream, res.Sequence}, at: time.Now(), traceParent: tp, senderNamespace: sender,
		event: dispatcher.EventRef{ID: e.Attribute("id"), Source: e.Attribute("source"), Type: e.Attribute("type")}})
	return res, nil
}

// Find returns the chains of namespace's record that hold an event of id
// (and source, unless empty), as Recorder.Find; none when the namespace
// has no record. It implements Reader.
func (n *Namespaces) Find(_ context.Context, namespace, id, source string) []Chain {
	r := n.recorder(namespace, false)
	if r == nil {
		return nil
	}
	return r.Find(id, source)
}

// Recent returns the namespace's most recently active chains, at most
// limit, as Recorder.Chains; none when the namespace has no record. It
// implements Reader.
func (n *Namespaces) Recent(_ context.Context, namespace string, limit int) []Chain {
	r := n.recorder(namespace, false)
	if r == nil {
		return nil
	}
	return r.Chains(limit)
}

// recorder returns namespace's Recorder, making it when make is set (and
// forgetting the namespace least recently recorded beyond the bound); nil
// for no namespace, or none recorded.
func (n *Namespaces) recorder(namespace string, make bool) *Recorder {
	if namespace == "" {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	nr, ok := n.byNS[namespace]
	if !ok {
		if !make {
			return nil
		}
		if len(n.byNS) >= n.namespaces {
			n.forgetOldestLocked()
		}
		r, _ := New(n.perNamespace) // never negative
		nr = &namespaceRecord{r: r}
		n.byNS[namespace] = nr
	}
	if make {
		nr.used = time.Now()
	}
	return nr.r
}

// forgetOldestLocked forgets the namespace least recently recorded.
func (n *Namespaces) forgetOldestLocked() {
	oldest := ""
	var at time.Time
	for ns, nr := range n.byNS {
		if oldest == "" || nr.used.Before(at) {
			oldest, at = ns, nr.used
		}
	}
	delete(n.byNS, oldest)
}
