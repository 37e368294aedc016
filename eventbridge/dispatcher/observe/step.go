package observe

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Outcome is what became of an event at one step of its delivery to a
// Subscription.
type Outcome string

// The outcomes of a Step.
const (
	// Delivered: the sink took the event (2xx) and it is acknowledged.
	Delivered Outcome = "delivered"
	// Failed: an attempt failed; the event is delivered again after a
	// backoff, unless a DeadLettered or Discarded step follows.
	Failed Outcome = "failed"
	// DeadLettered: the event was given up and kept in the dead-letter
	// stream, where it can be replayed.
	DeadLettered Outcome = "dead-lettered"
	// Discarded: the event was given up and dropped (deadLetter "false",
	// or its dead letter could not be stored for want of room).
	Discarded Outcome = "discarded"
)

// EventRef names a CloudEvent by its attributes.
type EventRef struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Type   string `json:"type"`
}

// Step is one step of an event's delivery to a Subscription: an attempt
// (Delivered or Failed), or the event given up (DeadLettered, Discarded).
type Step struct {
	// Namespace and Subscription name the Subscription.
	Namespace    string `json:"namespace"`
	Subscription string `json:"subscription"`
	// SinkNamespace and SinkService name the Service the Subscription's
	// sink points at.
	SinkNamespace string `json:"sinkNamespace"`
	SinkService   string `json:"sinkService"`
	// Event is the event delivered.
	Event EventRef `json:"event"`
	// Sequence is the event's sequence in its partition's stream
	// (Stream); an event replayed from the dead-letter stream has a
	// sequence of its own.
	Sequence uint64 `json:"sequence"`
	// Stream is the stream of the event's partition: two partitions'
	// events may have one Sequence.
	Stream string `json:"stream,omitempty"`
	// TraceParent is the W3C trace context stored with the event, if any.
	TraceParent string `json:"traceParent,omitempty"`
	// Attempt counts the delivery attempts of the event, this one
	// included; for a given-up event, the attempts made.
	Attempt int `json:"attempt"`
	// Outcome is what became of the event.
	Outcome Outcome `json:"outcome"`
	// Status is the sink's HTTP status; 0 for a network error, and for a
	// given-up event whose last attempt got none.
	Status int `json:"status,omitempty"`
	// Error says why the attempt failed or the event was given up.
	Error string `json:"error,omitempty"`
	// Duration is how long the attempt took; zero for a given-up event.
	Duration time.Duration `json:"duration,omitempty"`
	// Reply is the CloudEvent a Delivered attempt's sink answered with. It
	// is stored as a new event unless it is invalid or over the hop limit.
	Reply *EventRef `json:"reply,omitempty"`
	// At is when the step ended.
	At time.Time `json:"at"`
}

// Observer is told every Step of every delivery, on the goroutine that
// delivers the event, so it must return quickly and never block.
type Observer interface {
	Observe(Step)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Step)

// Observe calls f.
func (f ObserverFunc) Observe(s Step) { f(s) }

// Counts are a Subscription's delivery counts, the same numbers as the
// Prometheus counters of Metrics.
type Counts struct {
	// Delivered counts events the sink acknowledged (2xx).
	Delivered uint64 `json:"delivered"`
	// Failed counts failed delivery attempts.
	Failed uint64 `json:"failed"`
	// DeadLettered counts events moved to the dead-letter stream.
	DeadLettered uint64 `json:"deadLettered"`
	// Discarded counts events dropped after their last attempt.
	Discarded uint64 `json:"discarded"`
}

// tally is one Subscription's Counts, updated atomically.
type tally struct {
	delivered, failed, deadLettered, discarded atomic.Uint64
}

// replyRef names the CloudEvent of a sink's reply: from its ce- headers in
// binary mode, from its body in structured mode; nil when neither names an
// id.
func replyRef(h http.Header, body []byte) *EventRef {
	if id := h.Get("Ce-Id"); id != "" {
		return &EventRef{ID: id, Source: h.Get("Ce-Source"), Type: h.Get("Ce-Type")}
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "application/cloudevents+json") {
		return nil
	}
	var ref EventRef
	if json.Unmarshal(body, &ref) != nil || ref.ID == "" {
		return nil
	}
	return &ref
}
