package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/baggage"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// Errors of Store, one per answer the publisher gives. Every error Store
// returns wraps exactly one of them or ErrInvalidEvent.
var (
	// ErrTooLarge: the event is larger than the stream or NATS accepts.
	ErrTooLarge = errors.New("event too large")
	// ErrStorageFull: the event stream is full.
	ErrStorageFull = errors.New("event storage full")
	// ErrUnavailable: NATS or the stream cannot be reached or did not answer.
	ErrUnavailable = errors.New("event storage unavailable")
)

// Result is what JetStream answered to a stored event.
type Result struct {
	// Sequence is the event's sequence number in the stream.
	Sequence uint64
	// Duplicate is true when an event with the same message id was already
	// stored within the de-duplication window; it was not stored again.
	Duplicate bool
}

// Store writes events into the event stream and answers only once JetStream
// has stored them. It is safe for concurrent use.
type Store struct {
	js     jetstream.JetStream
	stream string
}

// New returns a Store writing into the named event stream through js.
func New(js jetstream.JetStream, eventStream string) *Store {
	return &Store{js: js, stream: eventStream}
}

// Publish stores an event under its subject (kyma.<clean source>.<clean
// type>) with MsgID(sender, source, id) as message id, so a retried
// publish within the de-duplication window is stored once. traceParent and traceState are
// the trace context of the request that carried it, if any.
func (s *Store) Publish(ctx context.Context, e *event.Event, traceParent, traceState string) (Result, error) {
	return s.PublishRouted(ctx, e, "", traceParent, traceState)
}

// PublishRouted is Publish for an event routed by routeSource rather than
// by its own source: its subject is kyma.<clean routeSource>.<clean type>
// and routeSource is stored in the HeaderRouteSource header, which
// Subscriptions are matched with (RouteSource) and which is not delivered.
// The event keeps its source. An empty routeSource, or the event's own
// source, is Publish.
//
// The W3C baggage in ctx (go.opentelemetry.io/otel/baggage), if any, is
// stored with the event (HeaderBaggage) and goes with it to the sinks.
func (s *Store) PublishRouted(ctx context.Context, e *event.Event, routeSource, traceParent, traceState string) (Result, error) {
	h, data, err := Encode(e, traceParent, traceState)
	if err != nil {
		return Result{}, err
	}
	return s.PublishEncoded(ctx, h, data, routeSource)
}

// PublishEncoded is PublishRouted for an event already in its stored form
// (Encode's or EncodeBinary's headers, and its data): it checks the
// attributes against their bounds (CheckAttributes), adds the W3C baggage
// in ctx (unless longer than MaxBaggageLength) and the route, and stores it
// under its subject with its message id.
func (s *Store) PublishEncoded(ctx context.Context, h nats.Header, data []byte, routeSource string) (Result, error) {
	if err := CheckAttributes(h); err != nil {
		return Result{}, err
	}
	if b := baggage.FromContext(ctx); b.Len() > 0 {
		if v := b.String(); len(v) <= MaxBaggageLength {
			h[HeaderBaggage] = []string{v}
		}
	}
	source, id, eventType := Attribute(h, "source"), Attribute(h, "id"), Attribute(h, "type")
	if routeSource != "" && routeSource != source {
		h[HeaderRouteSource] = []string{routeSource}
	}
	subject, err := v1alpha2.EventSubject(RouteSource(h), eventType)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return s.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: data}, MsgID(Attribute(h, SenderExtension), source, id))
}

// PublishMsg stores an already encoded event under msg.Subject with the
// given message id. It is how dead letters are stored and replayed (to
// stream.ReplaySubject) and is otherwise like Publish. Every message the
// Store writes passes here: a subject over MaxSubjectLength
// (ErrInvalidEvent) or headers over JetStream's bound (ErrTooLarge) are
// refused before anything is sent, so that no message can make NATS close
// the connection.
func (s *Store) PublishMsg(ctx context.Context, msg *nats.Msg, msgID string) (Result, error) {
	if err := checkMsg(msg, msgID, s.stream); err != nil {
		return Result{}, err
	}
	ack, err := s.publish(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(s.stream))
	if err != nil {
		return Result{}, fmt.Errorf("store event on %s: %w", msg.Subject, Classify(err))
	}
	return Result{Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// AttemptTimeout bounds one attempt to store a message when the caller's
// context has a deadline: JetStream answers a healthy publish in
// milliseconds, and one it has not answered by then is most likely lost
// (the stream's leader died with it, a new one is being elected), so it
// is sent again with the same message id until the caller's deadline.
// JetStream's de-duplication stores it once whichever attempt arrives.
const AttemptTimeout = 2 * time.Second

// publish is js.PublishMsg made again after each attempt that JetStream
// did not answer within AttemptTimeout, while ctx's deadline allows;
// without a deadline it is one attempt (nats.go's default timeout).
func (s *Store) publish(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		return s.js.PublishMsg(ctx, msg, opts...)
	}
	for {
		attempt, cancel := context.WithTimeout(ctx, AttemptTimeout)
		ack, err := s.js.PublishMsg(attempt, msg, opts...)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return ack, err
		}
	}
}

// Classify wraps a JetStream publish error in ErrTooLarge, ErrStorageFull or
// ErrUnavailable.
func Classify(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum, 10097: // 10097: headers over 64 KiB
			return fmt.Errorf("%w: %w", ErrTooLarge, err)
		case 10023: // insufficient resources: the server or account is out of storage
			return fmt.Errorf("%w: %w", ErrStorageFull, err)
		case 10077: // store failed: full when it says maximum bytes or messages exceeded
			if strings.Contains(apiErr.Description, "maximum") {
				return fmt.Errorf("%w: %w", ErrStorageFull, err)
			}
		}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Stream is the name of the event stream the Store writes into.
func (s *Store) Stream() string { return s.stream }
