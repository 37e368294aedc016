package eventpath

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// Origin says how an event came to be stored.
type Origin string

// The origins of an Event.
const (
	// Published: by a producer outside kfn dev, or by a function in a way
	// that cannot be linked (a handler that traces with a span of its own).
	Published Origin = "published"
	// Emitted: by the function that was handling the parent delivery, or,
	// for an event that starts a chain (Call set), an HTTP request.
	Emitted Origin = "emitted"
	// Reply: the CloudEvent the sink of the parent delivery answered with.
	Reply Origin = "reply"
	// Replay: the parent event stored again from the dead-letter stream.
	Replay Origin = "replay"
)

// Chain is an event that started in kfn dev, or several of one trace, with
// everything that followed from them.
type Chain struct {
	// TraceID is the W3C trace id the chain's events share; empty for an
	// event stored without trace context.
	TraceID string `json:"traceId,omitempty"`
	// Events are the chain's first events, in the order they were stored.
	Events []*Event `json:"events"`
	// Updated is when anything in the chain last happened.
	Updated time.Time `json:"updated"`
}

// Event is one stored event and what became of it.
type Event struct {
	// Sequence is the event's sequence in its partition's stream.
	Sequence uint64 `json:"sequence"`
	// Stream is the stream of the event's partition.
	Stream string `json:"stream,omitempty"`
	ID     string `json:"id"`
	Source string `json:"source"`
	Type   string `json:"type"`
	// Subject is the event's subject in the event stream.
	Subject string `json:"subject,omitempty"`
	// Stored is when the stream stored it; zero when only its deliveries
	// were seen (it was stored before kfn dev started).
	Stored time.Time `json:"stored,omitzero"`
	Origin Origin    `json:"origin"`
	// Call is the HTTP request whose handling emitted the event, when a
	// function emitted it while handling one through kfn dev's gateway.
	Call *Call `json:"call,omitempty"`
	// Deliveries are its deliveries to Subscriptions, by namespace and
	// name (one whose first attempt is under way may lack the name).
	Deliveries []*Delivery `json:"deliveries"`
	// Replays are the event stored again from the dead-letter stream.
	Replays []*Event `json:"replays,omitempty"`
}

// Call is an HTTP request to a function.
type Call struct {
	// Function is the function as "namespace/name".
	Function string `json:"function"`
	// Request is the request's method and path.
	Request string `json:"request"`
}

// Delivery is an event's delivery to one Subscription.
type Delivery struct {
	Namespace    string `json:"namespace"`
	Subscription string `json:"subscription"`
	// Function is the sink's Service as "namespace/name": the function
	// that receives the event.
	Function string `json:"function"`
	// Outcome is the latest step's: delivered, failed (to be retried),
	// dead-lettered or discarded; empty while the first attempt is under
	// way.
	Outcome dispatcher.Outcome `json:"outcome,omitempty"`
	// Reason says why the last attempt failed or the event was given up.
	Reason string `json:"reason,omitempty"`
	// Attempts counts the attempts made.
	Attempts int `json:"attempts"`
	// Steps are the attempts: all of them, or the first and the latest
	// when there were many.
	Steps []Attempt `json:"steps"`
	// Emitted are the events the function emitted while handling the event,
	// and the CloudEvent it replied with.
	Emitted []*Event `json:"emitted,omitempty"`
	// Updated is when its latest step ended.
	Updated time.Time `json:"updated,omitzero"`
}

// Attempt is one delivery attempt.
type Attempt struct {
	Number  int                `json:"number"`
	Outcome dispatcher.Outcome `json:"outcome"`
	// Status is the sink's HTTP status, 0 for a network error.
	Status   int           `json:"status,omitempty"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration"`
	At       time.Time     `json:"at"`
}

// Chains returns the most recently active chains, at most limit (all when
// limit <= 0), most recent first. The result is the caller's.
func (r *Recorder) Chains(limit int) []Chain {
	r.mu.Lock()
	defer r.mu.Unlock()

	l := linker{spans: r.spans, out: make(map[*record]*Event, len(r.order)), byRef: map[ref][]*record{}, replyTo: map[ref]replyOrigin{}}
	for _, k := range r.order {
		rec := r.events[k]
		e := rec.event()
		l.out[rec] = e
		l.byRef[rec.ref] = append(l.byRef[rec.ref], rec)
		for i, d := range rec.deliveries {
			if d.reply != nil {
				l.replyTo[*d.reply] = replyOrigin{rec: rec, d: e.Deliveries[i]}
			}
		}
	}

	chains := map[string]*Chain{}
	var order []*Chain
	for _, k := range r.order {
		rec := r.events[k]
		e := l.out[rec]
		if l.link(rec, e) {
			continue
		}
		key := rec.traceID.String()
		if !rec.traceID.IsValid() {
			key = fmt.Sprintf("seq:%s:%d", k.stream, k.seq) // no trace: a chain of its own
		}
		c, ok := chains[key]
		if !ok {
			c = &Chain{}
			if rec.traceID.IsValid() {
				c.TraceID = key
			}
			chains[key] = c
			order = append(order, c)
		}
		c.Events = append(c.Events, e)
	}
	for _, e := range l.out {
		slices.SortStableFunc(e.Deliveries, func(a, b *Delivery) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Subscription, b.Subscription))
		})
	}
	for _, c := range order {
		for _, e := range c.Events {
			c.Updated = latest(c.Updated, e.updated())
		}
	}
	slices.SortStableFunc(order, func(a, b *Chain) int { return b.Updated.Compare(a.Updated) })
	if limit > 0 && len(order) > limit {
		order = order[:limit]
	}
	result := make([]Chain, len(order))
	for i, c := range order {
		result[i] = *c
	}
	return result
}

// replyOrigin is the delivery whose sink replied with an event.
type replyOrigin struct {
	rec *record
	d   *Delivery
}

// linker finds where each event came from, among the copies Chains makes.
type linker struct {
	spans   map[trace.SpanID]attemptSpan
	out     map[*record]*Event
	byRef   map[ref][]*record
	replyTo map[ref]replyOrigin
}

// earlier reports whether a was stored before b: by their sequences in
// one stream, else (two partitions) as the Recorder first saw them.
func earlier(a, b *record) bool {
	if a.stream == b.stream {
		return a.seq < b.seq
	}
	return a.pos < b.pos
}

// before returns the latest event with the ref stored before rec.
func (l *linker) before(x ref, rec *record) (*Event, bool) {
	var latest *record
	for _, c := range l.byRef[x] {
		if earlier(c, rec) && (latest == nil || earlier(latest, c)) {
			latest = c
		}
	}
	if latest == nil {
		return nil, false
	}
	return l.out[latest], true
}

// link attaches e under the event or delivery it came from, and reports
// whether it found one. Links only ever go to an earlier event, so the
// result is a forest.
func (l *linker) link(rec *record, e *Event) bool {
	if rec.replay {
		orig, ok := l.before(rec.ref, rec)
		if ok {
			e.Origin = Replay
			orig.Replays = append(orig.Replays, e)
		}
		return ok
	}
	if rt, ok := l.replyTo[rec.ref]; ok && earlier(rt.rec, rec) {
		e.Origin = Reply
		rt.d.Emitted = append(rt.d.Emitted, e)
		return true
	}
	if !rec.parent.IsValid() {
		return false
	}
	span, ok := l.spans[rec.parent]
	if !ok {
		return false
	}
	if span.request != "" {
		// Emitted for an HTTP request: it starts its chain.
		e.Origin, e.Call = Emitted, &Call{Function: span.function, Request: span.request}
		return false
	}
	parent, ok := l.before(span.event, rec)
	if !ok {
		return false
	}
	e.Origin = Emitted
	d := parent.deliveryTo(span.function)
	d.Emitted = append(d.Emitted, e)
	return true
}

// deliveryTo returns e's delivery to function, adding one whose first
// attempt is under way when there is none yet (an event emitted while the
// function handles the attempt is stored before the attempt ends).
func (e *Event) deliveryTo(function string) *Delivery {
	for _, d := range e.Deliveries {
		if d.Function == function {
			return d
		}
	}
	d := &Delivery{Function: function, Steps: []Attempt{}}
	e.Deliveries = append(e.Deliveries, d)
	return d
}

// event copies what is known of the record; Origin starts as Published.
func (rec *record) event() *Event {
	e := &Event{
		Sequence: rec.seq, Stream: rec.stream, ID: rec.ref.id, Source: rec.ref.source, Type: rec.typ, Subject: rec.subject,
		Stored: rec.stored, Origin: Published, Deliveries: make([]*Delivery, len(rec.deliveries)),
	}
	for i, d := range rec.deliveries {
		e.Deliveries[i] = &Delivery{
			Namespace: d.namespace, Subscription: d.subscription, Function: d.function,
			Outcome: d.outcome, Reason: d.reason, Attempts: d.attempts, Steps: slices.Clone(d.steps), Updated: d.updated,
		}
		if e.Deliveries[i].Steps == nil {
			e.Deliveries[i].Steps = []Attempt{}
		}
	}
	return e
}

// updated is when anything last happened to e or what followed from it.
func (e *Event) updated() time.Time {
	t := e.Stored
	for _, d := range e.Deliveries {
		t = latest(t, d.Updated)
		for _, x := range d.Emitted {
			t = latest(t, x.updated())
		}
	}
	for _, x := range e.Replays {
		t = latest(t, x.updated())
	}
	return t
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
