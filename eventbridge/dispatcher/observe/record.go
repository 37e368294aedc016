package observe

import (
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// Config is what a Recorder records with; a zero field records nothing
// of its kind.
type Config struct {
	// Observers are told every Step.
	Observers []Observer
	// Tracer makes the spans (spans.go); nil: no spans.
	Tracer trace.Tracer
	// SkipUnsampled: Tracer's provider records no span whose parent was
	// not sampled (tracing.SkipsUnsampled), so an event whose stored
	// trace context is not sampled gets none started: its context goes
	// to the sink, a reply and a dead letter as stored.
	SkipUnsampled bool
	// Metrics are the Prometheus metrics; nil: none.
	Metrics *Metrics
	// DeadLetterStream names the dead-letter stream on the spans of
	// events given up.
	DeadLetterStream string
}

// Recorder records the deliveries of every Subscription of a dispatcher:
// Counts for each, and what Config asks for. Safe for concurrent use.
type Recorder struct {
	cfg Config
	// tallies count the Steps by Subscription (a *tally each).
	tallies sync.Map
}

type key struct{ namespace, name string }

// NewRecorder returns a Recorder that records with cfg.
func NewRecorder(cfg Config) *Recorder { return &Recorder{cfg: cfg} }

// Counts returns the Subscription's delivery counts since it was first
// recorded (For) after Forget, or ever.
func (r *Recorder) Counts(namespace, name string) Counts {
	t := r.tallyOf(key{namespace, name})
	return Counts{
		Delivered: t.delivered.Load(), Failed: t.failed.Load(),
		DeadLettered: t.deadLettered.Load(), Discarded: t.discarded.Load(),
	}
}

// Forget drops the Subscription's counts and metrics: it is no longer
// served.
func (r *Recorder) Forget(namespace, name string) {
	r.cfg.Metrics.Forget(namespace, name)
	r.tallies.Delete(key{namespace, name})
}

func (r *Recorder) tallyOf(k key) *tally {
	if t, ok := r.tallies.Load(k); ok {
		return t.(*tally)
	}
	t, _ := r.tallies.LoadOrStore(k, &tally{})
	return t.(*tally)
}

// Record records the deliveries of one Subscription, whose sink is the
// Service sinkNamespace/sinkService: made once per worker, so that no
// event looks its metrics up.
type Record struct {
	r                                           *Recorder
	namespace, name, sinkNamespace, sinkService string
	// Count are the Subscription's metrics.
	Count *Counters
	tally *tally
	names spanNames
}

// For returns the Record of the Subscription namespace/name.
func (r *Recorder) For(namespace, name, sinkNamespace, sinkService string) *Record {
	return &Record{
		r: r, namespace: namespace, name: name, sinkNamespace: sinkNamespace, sinkService: sinkService,
		Count: r.cfg.Metrics.ForSubscription(namespace, name),
		tally: r.tallyOf(key{namespace, name}),
		names: newSpanNames(namespace, name),
	}
}

// Answer is what became of one attempt, as recorded.
type Answer struct {
	// Status is the sink's HTTP status; 0 for none.
	Status int
	// Delivered says the sink took the event.
	Delivered bool
	// Reason says why the attempt failed; "" when delivered.
	Reason string
	// Reply and ReplyBody are the sink's CloudEvent reply; nil if none.
	Reply     http.Header
	ReplyBody []byte
}

// ObserveAttempt counts one attempt, begun at began, and tells the
// observers of it.
func (rec *Record) ObserveAttempt(msg jetstream.Msg, meta *jetstream.MsgMetadata, a Answer, began time.Time) {
	s := rec.step(msg, meta)
	s.Duration = s.At.Sub(began)
	s.Status = a.Status
	t := rec.tally
	if a.Delivered {
		s.Outcome = Delivered
		t.delivered.Add(1)
	} else {
		s.Outcome = Failed
		s.Error = a.Reason
		t.failed.Add(1)
	}
	if len(rec.r.cfg.Observers) == 0 {
		return
	}
	if s.Outcome == Delivered && a.Reply != nil {
		s.Reply = replyRef(a.Reply, a.ReplyBody)
	}
	rec.tell(s)
}

// ObserveGiveUp counts an event given up (DeadLettered or Discarded) and
// tells the observers of it.
func (rec *Record) ObserveGiveUp(msg jetstream.Msg, meta *jetstream.MsgMetadata, outcome Outcome, status int, reason string) {
	s := rec.step(msg, meta)
	s.Outcome, s.Status, s.Error = outcome, status, reason
	t := rec.tally
	if outcome == DeadLettered {
		t.deadLettered.Add(1)
	} else {
		t.discarded.Add(1)
	}
	rec.tell(s)
}

func (rec *Record) step(msg jetstream.Msg, meta *jetstream.MsgMetadata) Step {
	s := Step{
		Namespace: rec.namespace, Subscription: rec.name,
		SinkNamespace: rec.sinkNamespace, SinkService: rec.sinkService,
		Attempt: int(meta.NumDelivered), Sequence: meta.Sequence.Stream, Stream: meta.Stream, At: time.Now(),
	}
	if len(rec.r.cfg.Observers) == 0 {
		return s
	}
	h := msg.Headers()
	s.Event = EventRef{ID: eventstore.Attribute(h, "id"), Source: eventstore.Attribute(h, "source"), Type: eventstore.Attribute(h, "type")}
	if v := h[eventstore.HeaderTraceParent]; len(v) > 0 {
		s.TraceParent = v[0]
	}
	return s
}

func (rec *Record) tell(s Step) {
	for _, o := range rec.r.cfg.Observers {
		o.Observe(s)
	}
}
