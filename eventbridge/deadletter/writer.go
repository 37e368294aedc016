package deadletter

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// WriteTimeout bounds the wait for the dead-letter stream to store one
// letter.
const WriteTimeout = 10 * time.Second

// Writer stores dead letters in the dead-letter stream, through one
// event store made with it: an event given up costs one publish, nothing
// set up for it. Its methods are safe for concurrent use.
type Writer struct {
	store *eventstore.Store
}

// NewWriter returns a Writer to the dead-letter stream deadLetterStream.
func NewWriter(js jetstream.JetStream, deadLetterStream string) *Writer {
	return &Writer{store: eventstore.New(js, deadLetterStream)}
}

// Write stores the dead letter of the event with headers h and data
// (NewMsg), once per event and Subscription (MsgID). It waits at most
// WriteTimeout, also when ctx is done (a give-up is finished when the
// worker stops). The error wraps eventstore's sentinels
// (eventstore.ErrStorageFull when the stream or the namespace's share of
// it is full): the event was not dead-lettered and must stay unsettled.
func (w *Writer) Write(ctx context.Context, h nats.Header, data []byte, f Failure) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	if _, err := w.store.PublishMsg(ctx, NewMsg(h, data, f), MsgID(f)); err != nil {
		return fmt.Errorf("store dead letter of %s/%s event %d: %w", f.Namespace, f.Subscription, f.Sequence, err)
	}
	return nil
}
