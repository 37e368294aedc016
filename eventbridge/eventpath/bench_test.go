package eventpath

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// BenchmarkRecordEvent is the Recorder's cost per event in kfn dev: the
// stored event, one attempt span and one delivered step, with the bound of
// DefaultMaxEvents reached.
func BenchmarkRecordEvent(b *testing.B) {
	r, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		seq := uint64(i + 1)
		e := dispatcher.EventRef{ID: fmt.Sprint(i), Source: "shop", Type: "order.created.v1"}
		r.stored(eventKey{seq: seq}, now, "kyma.shop.order.created.v1", e, tp)
		r.attempted(newSpanID(), attemptSpan{event: ref{source: e.Source, id: e.ID}, function: "default/fulfil"})
		r.Observe(dispatcher.Step{Namespace: "default", Subscription: "fulfil", SinkNamespace: "default", SinkService: "fulfil",
			Event: e, Sequence: seq, TraceParent: tp, Attempt: 1, Outcome: dispatcher.Delivered, Status: 200, At: now})
		select {
		case <-r.Changes():
		default:
		}
	}
}

// BenchmarkChains is one read of the web view's chains with
// DefaultMaxEvents events recorded, each emitted by the delivery of the
// one before in chains of ten.
func BenchmarkChains(b *testing.B) {
	r, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var span string
	for i := range DefaultMaxEvents {
		seq := uint64(i + 1)
		e := dispatcher.EventRef{ID: fmt.Sprint(i), Source: "shop", Type: "order.created.v1"}
		trace := fmt.Sprintf("%032x", i/10+1) // a trace per chain
		tp := "00-" + trace + "-00f067aa0ba902b7-00"
		if i%10 != 0 {
			tp = "00-" + trace + "-" + span + "-00"
		}
		r.stored(eventKey{seq: seq}, now, "kyma.shop.order.created.v1", e, tp)
		id := newSpanID()
		span = id.String()
		r.attempted(id, attemptSpan{event: ref{source: e.Source, id: e.ID}, function: "default/fn"})
		r.Observe(dispatcher.Step{Namespace: "default", Subscription: "fn", SinkNamespace: "default", SinkService: "fn",
			Event: e, Sequence: seq, TraceParent: tp, Attempt: 1, Outcome: dispatcher.Delivered, Status: 200, At: now})
	}
	if n := len(r.Chains(0)); n != DefaultMaxEvents/10 {
		b.Fatalf("%d chains, want %d", n, DefaultMaxEvents/10)
	}
	b.ReportAllocs()
	for range b.N {
		r.Chains(DefaultMaxEvents)
	}
}

// BenchmarkNamespaceRecordMemory is the memory one namespace's full record
// holds in an event bridge (DefaultEventsPerNamespace events, each stored
// and delivered to two Subscriptions at the first attempt): reported as
// bytes/namespace (the heap in use after a collection, less before).
// DefaultNamespaces of them bound the whole.
func BenchmarkNamespaceRecordMemory(b *testing.B) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	now := time.Now()
	var held []*Namespaces
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range b.N {
		n, err := NewNamespaces(0, 0)
		if err != nil {
			b.Fatal(err)
		}
		for i := range DefaultEventsPerNamespace {
			seq := uint64(i + 1)
			e := dispatcher.EventRef{ID: fmt.Sprintf("order-%08d", i), Source: "shop", Type: "order.created.v1"}
			n.stored(storedEvent{key: eventKey{seq: seq}, at: now, event: e, traceParent: tp, senderNamespace: "team-a"})
			for _, s := range []string{"fulfil", "audit"} {
				n.Observe(dispatcher.Step{Namespace: "team-a", Subscription: s, SinkNamespace: "team-a", SinkService: s,
					Event: e, Sequence: seq, TraceParent: tp, Attempt: 1, Outcome: dispatcher.Delivered, Status: 200, At: now})
			}
		}
		held = append(held, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "bytes/namespace")
	runtime.KeepAlive(held)
}
