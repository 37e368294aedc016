package pull

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Msg is a message a Puller received, as a jetstream.Msg. It cannot be
// nats.go's own: jetstream makes its messages only for the subscriptions
// of its own Consume, Messages and Fetch (the type is unexported, and so
// is the function that wraps a nats.Msg in it), so Msg settles through
// the nats.Msg's own JetStream methods, which send the same
// acknowledgements on the same subjects. Its metadata is read from the
// acknowledgement subject at the first call of Metadata (the Puller's,
// which routes the message by its consumer); Metadata is not safe for
// concurrent use with Redelivered.
//
// A Msg counts against its Puller's byte bounds until Release.
type Msg struct {
	msg  *nats.Msg
	meta jetstream.MsgMetadata
	read bool  // meta is read
	err  error // why it could not be
	// pl is the pull whose held bytes count the message, size its bytes;
	// pl is nil once released. Both are guarded by the puller's mu.
	pl   *Pull
	size int64
	// h is the Handler of the pull that received the message; nil for
	// one of NewMsg.
	h Handler
	// session is the session of a pinned pull's message (Session).
	session Session
}

// Session is what a message of a pinned pull (Puller.AddPinned) was received in:
// the pin the server gave the client, and the connection's count of
// reconnects. Within one session a consumer hands out its events in the
// order of the stream, and the events it handed out before the session
// (to another client, or lost with a connection) come again only after
// their ack wait: a holder that keeps events of a key in order waits, at
// each new session, until every event the consumer handed out is in its
// hands.
type Session struct {
	Pin        string
	Reconnects uint64
}

// Session returns the session the message was received in; the zero
// Session for a message of a pull that is not pinned, or of NewMsg.
func (e *Msg) Session() Session { return e.session }

// Run hands the message to the Handle of the pull that received it, which
// makes it a Task for Goroutines. A message of NewMsg has none: Run does
// nothing.
func (e *Msg) Run() {
	if e.h != nil {
		e.h.Handle(e)
	}
}

// NewMsg returns m as a Msg that counts against no Puller's bounds: a
// message received otherwise (a benchmark's, say). meta, when not nil, is
// its metadata, instead of what its reply subject says.
func NewMsg(m *nats.Msg, meta *jetstream.MsgMetadata) *Msg {
	if meta == nil {
		return &Msg{msg: m}
	}
	return &Msg{msg: m, meta: *meta, read: true}
}

// Redelivered counts one more delivery in the message's metadata, as
// JetStream counts a redelivery: for a message its holder delivers again
// itself instead of handing it back.
func (e *Msg) Redelivered() {
	if _, err := e.Metadata(); err == nil {
		e.meta.NumDelivered++
	}
}

var _ jetstream.Msg = (*Msg)(nil)

// Metadata returns the message's JetStream metadata, read from its
// acknowledgement subject once; the same pointer every time.
func (e *Msg) Metadata() (*jetstream.MsgMetadata, error) {
	if !e.read {
		e.read = true
		meta, err := e.msg.Metadata()
		if err != nil {
			e.err = err
		} else {
			e.meta = jetstream.MsgMetadata{
				Sequence:     jetstream.SequencePair{Consumer: meta.Sequence.Consumer, Stream: meta.Sequence.Stream},
				NumDelivered: meta.NumDelivered, NumPending: meta.NumPending, Timestamp: meta.Timestamp,
				Stream: meta.Stream, Consumer: meta.Consumer, Domain: meta.Domain,
			}
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	return &e.meta, nil
}

// Data returns the message's payload.
func (e *Msg) Data() []byte { return e.msg.Data }

// Headers returns the message's headers.
func (e *Msg) Headers() nats.Header { return e.msg.Header }

// Subject returns the subject the message was stored on.
func (e *Msg) Subject() string { return e.msg.Subject }

// Reply returns the subject the message is acknowledged on.
func (e *Msg) Reply() string { return e.msg.Reply }

// Ack acknowledges the message.
func (e *Msg) Ack() error { return e.msg.Ack() }

// Nak asks for the message to be delivered again at once.
func (e *Msg) Nak() error { return e.msg.Nak() }

// InProgress resets the message's ack wait.
func (e *Msg) InProgress() error { return e.msg.InProgress() }

// Term tells JetStream never to deliver the message again.
func (e *Msg) Term() error { return e.msg.Term() }

// DoubleAck acknowledges the message and waits for the server's confirmation.
func (e *Msg) DoubleAck(ctx context.Context) error { return e.msg.AckSync(nats.Context(ctx)) }

// NakWithDelay asks for the message to be delivered again after delay.
func (e *Msg) NakWithDelay(delay time.Duration) error { return e.msg.NakWithDelay(delay) }

// TermWithReason is Term with the reason the server reports in its advisory.
func (e *Msg) TermWithReason(reason string) error {
	if err := e.msg.Respond([]byte("+TERM " + reason)); err != nil {
		return fmt.Errorf("terminate message: %w", err)
	}
	return nil
}

// TerminateTimeout bounds Terminate's wait for the server.
const TerminateTimeout = 5 * time.Second

// Terminate terminates msg with reason and waits, at most
// TerminateTimeout and also when ctx is done, until the server confirms
// it, as DoubleAck does for an ack: once it returns nil the consumer no
// longer counts msg as unacknowledged. nats.go's messages offer no
// confirmed term, so the term goes as a request on the message's reply
// subject over nc, which the server answers once the consumer has
// processed it. A message without a reply subject is terminated as
// TermWithReason does, which says why it cannot be.
func Terminate(ctx context.Context, nc *nats.Conn, msg jetstream.Msg, reason string) error {
	reply := msg.Reply()
	if reply == "" {
		return msg.TermWithReason(reason)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TerminateTimeout)
	defer cancel()
	if _, err := nc.RequestWithContext(ctx, reply, []byte("+TERM "+reason)); err != nil {
		return fmt.Errorf("terminate message: %w", err)
	}
	return nil
}
