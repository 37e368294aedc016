package delivery

import (
	"fmt"
	"io"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// ReplyBytes counts a sink's reply, from its headers to the last byte of
// its body read, against the held bytes of the event it answers
// (pull.Msg.Grow), until it is stored or dropped (Release): what a tenant's
// sink makes the dispatcher keep in memory counts within its
// Subscription's share (the dispatcher's Config.MaxHeldBytesPerSubscription) and the total,
// as its events do, and a reply that does not fit fails its attempt.
type ReplyBytes struct {
	msg *pull.Msg // nil: an event no puller holds, nothing counted
	n   int64
}

// newReplyBytes counts against msg's held bytes when the puller holds it.
func newReplyBytes(msg jetstream.Msg) *ReplyBytes {
	m, _ := msg.(*pull.Msg)
	return &ReplyBytes{msg: m}
}

// grow counts n more bytes; the error wraps pull.ErrNoRoom, and then
// what was counted is counted off in the same step (the reply is
// dropped; another reply read meanwhile has its room).
func (r *ReplyBytes) grow(n int64) error {
	if r.msg == nil {
		return nil
	}
	if err := r.msg.GrowOrGiveBack(n, r.n); err != nil {
		read := r.n
		r.n = 0
		return fmt.Errorf("the sink's reply does not fit the held bytes of its Subscription after %d bytes: %w", read, err)
	}
	r.n += n
	return nil
}

// Release counts off what grow counted. Safe to call more than once.
func (r *ReplyBytes) Release() {
	if r.msg != nil {
		r.msg.Shrink(r.n)
	}
	r.n = 0
}

// headerBytes is about the bytes header takes in memory: its names and
// values.
func headerBytes(h http.Header) int64 {
	var n int
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}

// countedBody counts each byte read of a reply's body (ReplyBytes.grow)
// and fails the read when they do not fit.
type countedBody struct {
	r     io.Reader
	bytes *ReplyBytes
}

func (c countedBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if gerr := c.bytes.grow(int64(n)); gerr != nil {
			return 0, gerr
		}
	}
	return n, err
}
