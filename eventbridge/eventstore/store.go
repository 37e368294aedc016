package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/baggage"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
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
	// Stream is the stream that stored it: with partitions, two events
	// may have one Sequence in two streams.
	Stream string
	// Duplicate is true when an event with the same message id was already
	// stored within the de-duplication window; it was not stored again.
	Duplicate bool
}

// Store writes events into one stream (the dead-letter stream for dead
// letters), or over the event stream's partitions (ForEventStream), and
// answers only once JetStream has stored them. It is safe for concurrent
// use.
type Store struct {
	js     jetstream.JetStream
	stream string
	// partitions, when it has more than one, spread new events over the
	// event stream's partitions; stream is partition 0's.
	partitions stream.Config
	// longest is the longest name of the streams the Store writes into:
	// the bound of an event's headers counts it, so that an event is
	// refused or stored whichever partition it goes to.
	longest string
}

// New returns a Store writing into the named stream through js.
func New(js jetstream.JetStream, stream string) *Store {
	return &Store{js: js, stream: stream, longest: stream}
}

// ForEventStream returns a Store writing each new event into its
// partition of the event stream of streams (stream.Config.PartitionOf: by
// its partitionkey extension, or without one its event subject), on the
// subject that partition takes (stream.PublishSubject), and a Restored
// message (a replay) into partition 0, on its own subject.
func ForEventStream(js jetstream.JetStream, streams stream.Config) *Store {
	names := streams.PartitionStreams()
	return &Store{js: js, stream: streams.EventStream, partitions: streams, longest: names[len(names)-1]}
}

// Put stores an event and answers once JetStream has stored it. Every
// path that stores an event comes here. A Store of the event stream's
// partitions (ForEventStream) stores a new event in its partition, or in
// partition 0 when no stream takes its partition's subject (closed while
// it is added or taken away, or without a leader a moment): an event of a
// key stored there while partitions change is not ordered with those of
// its partition, and is not de-duplicated with them.
//
// A new event (Encode's or EncodeBinary's) is checked against the bounds
// of its attributes (CheckAttributes), gets the W3C baggage in ctx
// (go.opentelemetry.io/otel/baggage; unless longer than MaxBaggageLength),
// which goes with it to the sinks, and its route (SetRoute), and is stored
// under its subject (kyma.<clean route source>.<clean type>) with message
// id MsgID(sender, source, id), so that one published again within the
// de-duplication window is stored once. A Restored message is stored as it
// is, on its subject under its message id.
//
// Whatever it stores, a subject over MaxSubjectLength (ErrInvalidEvent) or
// headers over JetStream's bound (ErrTooLarge) are refused before anything
// is sent, so that no message can make NATS close the connection. An event
// another stream than the Store's took (a stream not kfn's, made while
// kfn's was missing) is an error (ErrUnavailable) after it was stored there.
func (s *Store) Put(ctx context.Context, e Event) (Result, error) {
	var msg *nats.Msg
	msgID, into := e.msgID, s.stream
	if e.subject != "" {
		msg = &nats.Msg{Subject: e.subject, Header: e.h, Data: e.data}
	} else {
		var err error
		if msg, msgID, err = e.message(ctx); err != nil {
			return Result{}, err
		}
	}
	if err := checkMsg(msg, msgID, s.longest); err != nil {
		return Result{}, err
	}
	p := 0
	if e.subject == "" && s.partitions.PartitionCount() > 1 {
		p = s.partitions.PartitionOf(msg.Subject, e.Attribute(PartitionKeyExtension))
	}
	var ack *jetstream.PubAck
	var err error
	if p > 0 {
		subject := msg.Subject
		msg.Subject, into = stream.PublishSubject(p, subject), s.partitions.PartitionStream(p)
		ack, err = s.publish(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithRetryAttempts(0))
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// No stream takes partition p's subject: it is closed (being
			// added, or taken away and drained) or has no leader this
			// moment. Partition 0 stores the event; the Subscriptions'
			// consumers are in every partition.
			msg.Subject, into = subject, s.stream
			p = 0
		}
	}
	if p == 0 {
		ack, err = s.publish(ctx, msg, jetstream.WithMsgID(msgID))
	}
	if err == nil && ack.Stream != into {
		// JetStream lets no two streams of an account take one subject, so
		// only a stream not kfn's, made while kfn's was missing, can take
		// an event's subject. The stream is not named in the message
		// (Nats-Expected-Stream): JetStream stores that header with the
		// event, the ninth of a traced event, and every delivery reads it.
		return Result{}, fmt.Errorf("store event on %s: %w: stored in stream %s, not %s, which should take the subject", msg.Subject, ErrUnavailable, ack.Stream, into)
	}
	if err != nil {
		return Result{}, fmt.Errorf("store event on %s: %w", msg.Subject, Classify(err))
	}
	return Result{Sequence: ack.Sequence, Stream: ack.Stream, Duplicate: ack.Duplicate}, nil
}

// message completes a new event (its bounds checked, the baggage of ctx
// and its route added) and returns it with its subject and message id.
func (e *Event) message(ctx context.Context) (*nats.Msg, string, error) {
	if e.h == nil {
		return nil, "", fmt.Errorf("%w: no event", ErrInvalidEvent)
	}
	if err := CheckAttributes(e.h); err != nil {
		return nil, "", err
	}
	if b := baggage.FromContext(ctx); b.Len() > 0 {
		if v := b.String(); len(v) <= MaxBaggageLength {
			e.h[HeaderBaggage] = []string{v}
		}
	}
	source, id, eventType := e.Attribute("source"), e.Attribute("id"), e.Attribute("type")
	if e.route != "" && e.route != source {
		e.h[HeaderRouteSource] = []string{e.route}
	}
	subject, err := v1alpha2.EventSubject(RouteSource(e.h), eventType)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return &nats.Msg{Subject: subject, Header: e.h, Data: e.data}, MsgID(e.Attribute(SenderExtension), source, id), nil
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

// Stream is the name of the stream the Store writes into: partition 0's
// when it spreads events over partitions.
func (s *Store) Stream() string { return s.stream }

// PartitionKeyExtension is the CloudEvents extension whose value decides
// an event's partition (and, for a Subscription with ordering
// partitionkey, its order).
const PartitionKeyExtension = "partitionkey"
