package reply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// Result is what became of a reply; its values are the result label of
// the dispatcher's kfn_eventbridge_replies_total.
type Result string

// The results of a reply.
const (
	// Published: stored in the event stream as a new event.
	Published Result = "published"
	// Invalid: not a valid CloudEvent, too large, or not storable; dropped.
	Invalid Result = "invalid"
	// HopLimit: over the hop limit; dropped.
	HopLimit Result = "hop_limit"
	// Failed: valid, but storing it failed; the delivery is to be retried.
	Failed Result = "failed"
	// RateLimited: valid, but its namespace's rate of events
	// (admission.Rates, shared with its publishes) would let it be stored
	// only more than MaxRateWait from now; not stored, the delivery is to
	// be retried after RateLimitedRetryAfter.
	RateLimited Result = "rate_limited"
)

// MaxRateWait is how long a reply waits at most for its namespace's rate
// of events to let it be stored: a namespace whose sinks reply faster than
// its rate has its deliveries slowed to it, each reply stored once its
// turn comes, rather than failed.
const MaxRateWait = 10 * time.Second

// RateLimitedRetryAfter is how long a delivery whose reply was
// RateLimited waits at least before its next attempt, as the publisher's
// 429 asks a publisher to (Retry-After: 1).
const RateLimitedRetryAfter = time.Second

// ErrInvalid is wrapped by the errors of replies that cannot be events.
var ErrInvalid = errors.New("invalid reply")

// IsCloudEvent reports whether a sink's answer, by its headers, carries a
// CloudEvent (binary or structured mode).
func IsCloudEvent(h http.Header) bool {
	return h.Get("Ce-Specversion") != "" || strings.HasPrefix(h.Get("Content-Type"), "application/cloudevents+json")
}

// Read reads an answer's body of at most maxBytes; a longer one is an
// error wrapping ErrInvalid, a failed read any other error.
func Read(body io.Reader, maxBytes int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read reply: %w", err)
	case int64(len(b)) > maxBytes:
		return nil, fmt.Errorf("%w: over %d bytes", ErrInvalid, maxBytes)
	}
	return b, nil
}

// Reply is a sink's reply, decoded.
type Reply struct {
	// Event is the reply's event.
	Event *event.Event
	// Hops is its hop count: that of the event it answers plus one.
	Hops int
}

// Decode decodes the CloudEvent in a sink's answer (header and body) to
// the event whose stored headers are answered. The error wraps ErrInvalid.
func Decode(ctx context.Context, header http.Header, body []byte, answered nats.Header) (*Reply, error) {
	e, err := binding.ToEvent(ctx, cehttp.NewMessage(header, io.NopCloser(bytes.NewReader(body))))
	if err == nil {
		err = e.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Reply{Event: e, Hops: eventstore.Hops(answered) + 1}, nil
}

// Store stores replies in the event stream through one event store, each
// as a publish by the namespace of the Subscription whose sink answered:
// held to the same admission policy as the publisher's events (package
// admission: the sender's namespace recorded, a reply that names one
// itself or uses a source reserved to other namespaces refused, the hop
// limit) and to the store's bounds, de-duplicated within that namespace's
// events only, and counted in that namespace's rate of events, which its
// publishes share (admission.Rates): a reply waits for its turn (at most
// MaxRateWait), so that a namespace's sinks cannot store more events a
// second than its publishers may. Its methods are safe for concurrent
// use.
type Store struct {
	store  *eventstore.Store
	policy admission.Policy
	rates  *admission.Rates
}

// NewStore returns a Store of replies in the event stream of streams, each
// in its partition, that admits them by policy and takes them from rates
// (nil: no bound).
func NewStore(js jetstream.JetStream, streams stream.Config, policy admission.Policy, rates *admission.Rates) *Store {
	return &Store{store: eventstore.ForEventStream(js, streams), policy: policy, rates: rates}
}

// MaxHops returns the hop limit.
func (s *Store) MaxHops() int { return s.policy.Hops() }

// Publish stores r, sent by namespace sender (the Subscription's), with
// its hop count and the trace context given, and says what became of it.
// The error is nil but for Failed (the reply could not be stored, for a
// reason that may pass), RateLimited (wrapping admission.ErrTooManyEvents)
// and Invalid (why it was refused).
func (s *Store) Publish(ctx context.Context, r *Reply, sender, traceParent, traceState string) (Result, error) {
	if r.Hops > s.policy.Hops() {
		return HopLimit, nil
	}
	e, err := eventstore.Encode(r.Event, traceParent, traceState)
	if err != nil {
		return Invalid, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	e.SetHops(r.Hops) // the bridge's, whatever the sink wrote
	if err := s.policy.Admit(&e, sender); err != nil {
		return Invalid, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := s.rates.Wait(ctx, sender, e.Size(), MaxRateWait); errors.Is(err, admission.ErrTooManyEvents) {
		return RateLimited, fmt.Errorf("store reply %s: %w", r.Event.ID(), err)
	} else if err != nil {
		return Failed, fmt.Errorf("store reply %s: %w", r.Event.ID(), err)
	}
	if _, err := s.store.Put(ctx, e); err != nil {
		if errors.Is(err, eventstore.ErrInvalidEvent) || errors.Is(err, eventstore.ErrTooLarge) {
			return Invalid, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return Failed, fmt.Errorf("store reply %s: %w", r.Event.ID(), err)
	}
	return Published, nil
}
