package eventpath

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// DefaultMaxEvents is how many events a Recorder keeps by default.
const DefaultMaxEvents = 1000

// maxSteps bounds the attempts kept per delivery: the first and the last
// ones; Delivery.Attempts still counts them all.
const maxSteps = 10

// ref names an event by its CloudEvent source and id.
type ref struct{ source, id string }

// eventKey names a stored event: its stream (its partition's) and its
// sequence there.
type eventKey struct {
	stream string
	seq    uint64
}

// record is what is known of one stored event.
type record struct {
	eventKey
	// pos orders the records as the Recorder first saw them: events of
	// two partitions' streams are ordered by it, not by their sequences.
	pos        uint64
	ref        ref
	typ        string
	subject    string
	stored     time.Time // zero until the stream's copy is seen
	traceID    trace.TraceID
	parent     trace.SpanID // the span id of its stored traceparent
	replay     bool
	deliveries []*delivery
}

// delivery is what is known of one event's delivery to one Subscription.
type delivery struct {
	namespace, subscription, function string
	attempts                          int
	steps                             []Attempt
	outcome                           dispatcher.Outcome
	reason                            string
	reply                             *ref
	updated                           time.Time
}

// attemptSpan is what Transport noted of one delivery attempt, or Calls
// of one HTTP request to a function (request set, event zero).
type attemptSpan struct {
	event    ref
	function string
	request  string
}

// Recorder keeps the recent events of kfn dev and how they travelled. Feed
// it with Follow (the stored events), as the dispatcher's Observer (the
// delivery steps), and through Transport and TraceRoots (the links); read
// it with Chains. Safe for concurrent use.
type Recorder struct {
	max     int
	changes chan struct{}

	mu        sync.Mutex
	events    map[eventKey]*record
	order     []eventKey // of events, as first seen (pos), oldest first
	next      uint64     // the pos of the next record
	spans     map[trace.SpanID]attemptSpan
	spanOrder []trace.SpanID // a ring of the spans' ids, spanNext the oldest
	spanNext  int
}

var _ dispatcher.Observer = (*Recorder)(nil)

// New returns a Recorder that keeps the last maxEvents events it saw;
// DefaultMaxEvents when maxEvents is 0. The error is for a
// negative maxEvents.
func New(maxEvents int) (*Recorder, error) {
	if maxEvents < 0 {
		return nil, fmt.Errorf("eventpath: events to keep must not be negative, got %d", maxEvents)
	}
	if maxEvents == 0 {
		maxEvents = DefaultMaxEvents
	}
	return &Recorder{
		max: maxEvents, changes: make(chan struct{}, 1),
		events: map[eventKey]*record{}, spans: map[trace.SpanID]attemptSpan{},
		// Emitted events arrive within a delivery; a few spans per event
		// are plenty.
		spanOrder: make([]trace.SpanID, 4*maxEvents),
	}, nil
}

// Changes returns a channel that receives a value after what Chains returns
// may have changed; changes made while a value is unread merge into it. It
// is meant for one reader.
func (r *Recorder) Changes() <-chan struct{} { return r.changes }

func (r *Recorder) changed() {
	select {
	case r.changes <- struct{}{}:
	default:
	}
}

// Follow records every event stored in the stream named streamName through
// js from now on, reading headers only, until stop is called or ctx ends.
// The error is the failure to start reading.
func (r *Recorder) Follow(ctx context.Context, js jetstream.JetStream, streamName string) (stop func(), err error) {
	return follow(ctx, js, streamName, func(s storedEvent) { r.stored(s.key, s.at, s.subject, s.event, s.traceParent) })
}

// storedEvent is what follow reads of one stored event: its headers'
// attributes, not its data.
type storedEvent struct {
	key             eventKey
	at              time.Time
	subject         string
	event           dispatcher.EventRef
	traceParent     string
	senderNamespace string
}

// followInactive is how long the event stream keeps follow's consumer
// once its process stopped taking events.
const followInactive = 10 * time.Second

// follow calls seen with every event stored in the stream named
// streamName from now on, until stop is called or ctx ends.
func follow(ctx context.Context, js jetstream.JetStream, streamName string, seen func(storedEvent)) (stop func(), err error) {
	c, err := js.OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: true,
		// The event stream keeps an event while a consumer has yet to take
		// it: the consumer of a process that died goes soon, not after
		// the library's 5 minutes of events nobody else wants.
		InactiveThreshold: followInactive,
	})
	if err != nil {
		return nil, fmt.Errorf("follow stream %s: %w", streamName, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return // not a stream message: nothing to record
		}
		h := m.Headers()
		tp := ""
		if v := h[eventstore.HeaderTraceParent]; len(v) > 0 {
			tp = v[0]
		}
		seen(storedEvent{key: eventKey{meta.Stream, meta.Sequence.Stream}, at: meta.Timestamp, subject: m.Subject(),
			event:       dispatcher.EventRef{ID: eventstore.Attribute(h, "id"), Source: eventstore.Attribute(h, "source"), Type: eventstore.Attribute(h, "type")},
			traceParent: tp, senderNamespace: eventstore.Attribute(h, eventstore.SenderExtension)})
	})
	if err != nil {
		return nil, fmt.Errorf("follow stream %s: %w", streamName, err)
	}
	done := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); cc.Stop() }) }
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-done:
		}
	}()
	return stop, nil
}

// stored records an event the stream holds.
func (r *Recorder) stored(k eventKey, at time.Time, subject string, e dispatcher.EventRef, traceParent string) {
	sc := spanContext(traceParent, "") // outside the lock: it allocates
	r.mu.Lock()
	rec := r.recordLocked(k, e, sc)
	rec.stored, rec.subject = at, subject
	rec.replay = strings.HasPrefix(subject, stream.ReplaySubjectPrefix+".")
	r.mu.Unlock()
	r.changed()
}

// Observe records a delivery step; it implements dispatcher.Observer.
func (r *Recorder) Observe(s dispatcher.Step) {
	sc := spanContext(s.TraceParent, "")
	r.mu.Lock()
	rec := r.recordLocked(eventKey{s.Stream, s.Sequence}, s.Event, sc)
	d := rec.deliveryLocked(s.Namespace, s.Subscription)
	d.function = s.SinkNamespace + "/" + s.SinkService
	d.outcome, d.updated = s.Outcome, s.At
	switch s.Outcome {
	case dispatcher.Delivered, dispatcher.Failed:
		d.attempts = max(d.attempts, s.Attempt)
		d.reason = s.Error
		a := Attempt{Number: s.Attempt, Outcome: s.Outcome, Status: s.Status, Error: s.Error, Duration: s.Duration, At: s.At}
		if len(d.steps) == maxSteps {
			d.steps = slices.Delete(d.steps, maxSteps/2, maxSteps/2+1) // keep the first and the latest
		}
		d.steps = append(d.steps, a)
		if s.Reply != nil {
			d.reply = &ref{source: s.Reply.Source, id: s.Reply.ID}
		}
	default: // given up
		d.reason = s.Error
	}
	r.mu.Unlock()
	r.changed()
}

// attempted records the span id Transport gave a delivery attempt, or
// Calls an HTTP request.
func (r *Recorder) attempted(span trace.SpanID, a attemptSpan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.spans, r.spanOrder[r.spanNext]) // the oldest, if the ring is full
	r.spans[span] = a
	r.spanOrder[r.spanNext] = span
	r.spanNext = (r.spanNext + 1) % len(r.spanOrder)
}

// recordLocked returns the record of k, making it (and evicting the
// oldest beyond max) when it is new; sc is the event's trace context.
func (r *Recorder) recordLocked(k eventKey, e dispatcher.EventRef, sc trace.SpanContext) *record {
	if rec, ok := r.events[k]; ok {
		return rec
	}
	rec := &record{eventKey: k, pos: r.next, ref: ref{source: e.Source, id: e.ID}, typ: e.Type, traceID: sc.TraceID(), parent: sc.SpanID()}
	r.next++
	r.events[k] = rec
	r.order = append(r.order, k)
	for len(r.order) > r.max {
		delete(r.events, r.order[0])
		r.order = r.order[1:]
	}
	return rec
}

func (rec *record) deliveryLocked(namespace, subscription string) *delivery {
	for _, d := range rec.deliveries {
		if d.namespace == namespace && d.subscription == subscription {
			return d
		}
	}
	d := &delivery{namespace: namespace, subscription: subscription}
	rec.deliveries = append(rec.deliveries, d)
	return d
}
