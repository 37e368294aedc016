package eventpath

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// DefaultAskSubject is the core NATS subject on which an event bridge
// replica asks the others for their record of a namespace.
const DefaultAskSubject = "kfn.eventbridge.paths"

// Bounds of what the replicas ask and answer.
const (
	// askWait is how long a replica waits for the others' records: a
	// replica that answers later is left out of that answer.
	askWait = 300 * time.Millisecond
	// maxAnswerBytes bounds one replica's answer (NATS's payload is 1 MiB
	// by default): the namespace's oldest records are left out past it.
	maxAnswerBytes = 768 << 10
	// maxAnswers bounds the answers one question takes.
	maxAnswers = 16
)

// replicaHeader names the asking replica, which skips its own question.
const replicaHeader = "Kfn-Replica"

// Replicas answers a namespace's paths from every event bridge replica's
// record: each publisher stores and each dispatcher delivers some of the
// events, and a caller reaches one replica. Find asks the others (a core
// NATS request, answered by their Run) and merges their records with its
// own. Nothing is sent per event: the cost is the question's.
type Replicas struct {
	n       *Namespaces
	nc      *nats.Conn
	subject string
	replica string
	log     *slog.Logger
}

// NewReplicas returns a Replicas of n over nc on subject
// (DefaultAskSubject when empty), logging to log (nil discards).
func NewReplicas(n *Namespaces, nc *nats.Conn, subject string, log *slog.Logger) (*Replicas, error) {
	if n == nil || nc == nil {
		return nil, errors.New("eventpath: Replicas needs the Namespaces and a NATS connection")
	}
	if subject == "" {
		subject = DefaultAskSubject
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Replicas{n: n, nc: nc, subject: subject, replica: rand.Text(), log: log}, nil
}

// question is what a replica asks the others.
type question struct {
	Namespace string `json:"namespace"`
}

// Run answers the other replicas' questions until ctx ends. The error is
// the failure to subscribe.
func (r *Replicas) Run(ctx context.Context) error {
	sub, err := r.nc.Subscribe(r.subject, r.answer)
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", r.subject, err)
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
	return nil
}

// answer sends this replica's record of the namespace asked for.
func (r *Replicas) answer(m *nats.Msg) {
	if m.Reply == "" || m.Header.Get(replicaHeader) == r.replica {
		return // not a question, or its own
	}
	var q question
	if err := json.Unmarshal(m.Data, &q); err != nil || len(validation.IsDNS1123Label(q.Namespace)) > 0 {
		r.log.Warn("dropping a question for events' paths that names no namespace", "subject", m.Subject)
		return
	}
	var recs []wireRecord
	if rec := r.n.recorder(q.Namespace, false); rec != nil {
		recs = rec.export()
	}
	if err := r.nc.Publish(m.Reply, encodeNewest(recs, maxAnswerBytes)); err != nil {
		r.log.Warn("answering another replica's question for events' paths failed", "error", err)
	}
}

// Find returns the chains that hold the event of id (and source) in
// namespace's records of every replica that answers within askWait: this
// one's and the others', merged. The others' failure to answer leaves
// their part out. It implements Reader.
func (r *Replicas) Find(ctx context.Context, namespace, id, source string) []Chain {
	return r.merged(ctx, namespace).Find(id, source)
}

// Recent returns the namespace's most recently active chains, at most
// limit, from every replica's records as Find does. It implements Reader.
func (r *Replicas) Recent(ctx context.Context, namespace string, limit int) []Chain {
	return r.merged(ctx, namespace).Chains(limit)
}

// merged is namespace's record of this replica and of every other that
// answers within askWait.
func (r *Replicas) merged(ctx context.Context, namespace string) *Recorder {
	merged, _ := New(r.n.perNamespace * (maxAnswers + 1)) // never negative
	if rec := r.n.recorder(namespace, false); rec != nil {
		merged.merge(rec.export())
	}
	for _, recs := range r.ask(ctx, namespace) {
		merged.merge(recs)
	}
	return merged
}

// ask asks the other replicas for their records of namespace and returns
// the answers that came within askWait.
func (r *Replicas) ask(ctx context.Context, namespace string) [][]wireRecord {
	inbox := r.nc.NewRespInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		r.log.Warn("asking the other replicas for events' paths failed", "error", err)
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	data, _ := json.Marshal(question{Namespace: namespace})
	m := nats.NewMsg(r.subject)
	m.Reply, m.Data = inbox, data
	m.Header.Set(replicaHeader, r.replica)
	if err := r.nc.PublishMsg(m); err != nil {
		r.log.Warn("asking the other replicas for events' paths failed", "error", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	var answers [][]wireRecord
	for len(answers) < maxAnswers {
		a, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // the wait is over
		}
		var recs []wireRecord
		if err := json.Unmarshal(a.Data, &recs); err != nil || !validRecords(recs, namespace) {
			r.log.Warn("dropping another replica's answer for events' paths that does not decode", "namespace", namespace)
			continue
		}
		answers = append(answers, recs)
	}
	return answers
}

// validRecords reports whether an answer's records are bounded as this
// replica's are: their deliveries are Subscriptions of namespace.
func validRecords(recs []wireRecord, namespace string) bool {
	for _, rec := range recs {
		if len(rec.Deliveries) > maxWireDeliveries {
			return false
		}
		for _, d := range rec.Deliveries {
			if d.Namespace != namespace || len(d.Steps) > maxSteps {
				return false
			}
		}
	}
	return true
}

// maxWireDeliveries bounds the deliveries of one record in an answer.
const maxWireDeliveries = 1024

// wireRecord is a record as the replicas tell each other.
type wireRecord struct {
	Seq        uint64         `json:"seq"`
	Stream     string         `json:"stream,omitempty"`
	ID         string         `json:"id"`
	Source     string         `json:"source"`
	Type       string         `json:"type"`
	Subject    string         `json:"subject,omitempty"`
	Stored     time.Time      `json:"stored,omitzero"`
	TraceID    string         `json:"traceId,omitempty"`
	Parent     string         `json:"parent,omitempty"`
	Replay     bool           `json:"replay,omitempty"`
	Deliveries []wireDelivery `json:"deliveries,omitempty"`
}

// wireDelivery is a delivery as the replicas tell each other.
type wireDelivery struct {
	Namespace    string             `json:"namespace"`
	Subscription string             `json:"subscription"`
	Function     string             `json:"function"`
	Attempts     int                `json:"attempts"`
	Steps        []Attempt          `json:"steps,omitempty"`
	Outcome      dispatcher.Outcome `json:"outcome,omitempty"`
	Reason       string             `json:"reason,omitempty"`
	ReplyID      string             `json:"replyId,omitempty"`
	ReplySource  string             `json:"replySource,omitempty"`
	Updated      time.Time          `json:"updated"`
}

// export returns the records, oldest first, as the replicas tell them.
func (r *Recorder) export() []wireRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]wireRecord, 0, len(r.order))
	for _, k := range r.order {
		rec := r.events[k]
		w := wireRecord{Seq: rec.seq, Stream: rec.stream, ID: rec.ref.id, Source: rec.ref.source, Type: rec.typ, Subject: rec.subject,
			Stored: rec.stored, Replay: rec.replay}
		if rec.traceID.IsValid() {
			w.TraceID = rec.traceID.String()
		}
		if rec.parent.IsValid() {
			w.Parent = rec.parent.String()
		}
		for _, d := range rec.deliveries {
			wd := wireDelivery{Namespace: d.namespace, Subscription: d.subscription, Function: d.function, Attempts: d.attempts,
				Steps: slices.Clone(d.steps), Outcome: d.outcome, Reason: d.reason, Updated: d.updated}
			if d.reply != nil {
				wd.ReplyID, wd.ReplySource = d.reply.id, d.reply.source
			}
			w.Deliveries = append(w.Deliveries, wd)
		}
		out = append(out, w)
	}
	return out
}

// merge adds recs to r: a record it has gains what it lacks (the stored
// time, deliveries), and of a delivery both have, the one updated last
// is kept.
func (r *Recorder) merge(recs []wireRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range recs {
		var traceID trace.TraceID
		var parent trace.SpanID
		if b, err := hex.DecodeString(w.TraceID); err == nil && len(b) == len(traceID) {
			copy(traceID[:], b)
		}
		if b, err := hex.DecodeString(w.Parent); err == nil && len(b) == len(parent) {
			copy(parent[:], b)
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: parent})
		rec := r.recordLocked(eventKey{w.Stream, w.Seq}, dispatcher.EventRef{ID: w.ID, Source: w.Source, Type: w.Type}, sc)
		if rec.stored.IsZero() && !w.Stored.IsZero() {
			rec.stored, rec.subject, rec.replay = w.Stored, w.Subject, w.Replay
		}
		if !rec.traceID.IsValid() && sc.TraceID().IsValid() {
			rec.traceID, rec.parent = sc.TraceID(), sc.SpanID()
		}
		for _, wd := range w.Deliveries {
			rec.deliveryLocked(wd.Namespace, wd.Subscription).mergeFrom(wd)
		}
	}
}

// mergeFrom adds another replica's view of the delivery: the attempts
// either made (by number; the first and the latest kept, as Observe
// keeps them), and the outcome of the one updated last.
func (d *delivery) mergeFrom(wd wireDelivery) {
	for _, a := range wd.Steps {
		if !slices.ContainsFunc(d.steps, func(x Attempt) bool { return x.Number == a.Number && x.Outcome == a.Outcome }) {
			d.steps = append(d.steps, a)
		}
	}
	slices.SortStableFunc(d.steps, func(a, b Attempt) int { return a.At.Compare(b.At) })
	for len(d.steps) > maxSteps {
		d.steps = slices.Delete(d.steps, maxSteps/2, maxSteps/2+1)
	}
	d.attempts = max(d.attempts, wd.Attempts)
	if !d.updated.IsZero() && !wd.Updated.After(d.updated) {
		return
	}
	d.function, d.outcome, d.reason, d.updated = wd.Function, wd.Outcome, wd.Reason, wd.Updated
	d.reply = nil
	if wd.ReplyID != "" {
		d.reply = &ref{source: wd.ReplySource, id: wd.ReplyID}
	}
}

// encodeNewest encodes recs (oldest first) as a JSON array of at most
// limit bytes: the newest records that fit, each encoded once.
func encodeNewest(recs []wireRecord, limit int) []byte {
	var kept [][]byte
	size := len("[]")
	for i := len(recs) - 1; i >= 0; i-- {
		b, err := json.Marshal(recs[i])
		if err != nil || size+len(b)+1 > limit {
			break
		}
		kept = append(kept, b)
		size += len(b) + 1
	}
	slices.Reverse(kept)
	return append(append([]byte("["), bytes.Join(kept, []byte(","))...), ']')
}
