package activity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// JetStreamReader reads backlogs from JetStream's consumer API
// (jsstream.Backlogs): a Subscription's backlog is the sum of its
// consumers' in every partition of the event stream.
type JetStreamReader struct{ backlogs *jsstream.Backlogs }

var _ BacklogReader = (*JetStreamReader)(nil)

// NewJetStreamReader returns a reader of the consumers of the event
// stream's partitions (c's, and those taken away still drained).
func NewJetStreamReader(js jetstream.JetStream, c stream.Config) *JetStreamReader {
	return &JetStreamReader{backlogs: jsstream.NewBacklogs(js, c)}
}

// Backlogs implements [BacklogReader]. The error says which stream could not
// be listed.
func (r *JetStreamReader) Backlogs(ctx context.Context) (map[string]uint64, error) {
	return r.backlogs.Read(ctx)
}

// NATSListener listens with core NATS subscriptions, each of which the
// server ends after one message.
type NATSListener struct {
	nc *nats.Conn
}

var _ Listener = (*NATSListener)(nil)

// NewNATSListener returns a listener on the connection nc.
func NewNATSListener(nc *nats.Conn) *NATSListener { return &NATSListener{nc: nc} }

// Listen implements [Listener].
func (l *NATSListener) Listen(subjects []string, fire func()) (func(), error) {
	subs := make([]*nats.Subscription, 0, len(subjects))
	stop := func() {
		for _, sub := range subs {
			// An auto-unsubscribed or closed subscription is already gone.
			_ = sub.Unsubscribe()
		}
	}
	var once sync.Once
	handler := func(*nats.Msg) { once.Do(fire) }
	for _, subject := range subjects {
		sub, err := l.nc.Subscribe(subject, handler)
		if err != nil {
			stop()
			return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
		}
		subs = append(subs, sub)
		if err := sub.AutoUnsubscribe(1); err != nil && !errors.Is(err, nats.ErrBadSubscription) {
			stop()
			return nil, fmt.Errorf("limit subscription to %s: %w", subject, err)
		}
	}
	// The server must know the subscriptions before the caller relies on
	// them.
	if err := l.nc.FlushTimeout(5 * time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("flush subscriptions: %w", err)
	}
	var stopOnce sync.Once
	return func() { stopOnce.Do(stop) }, nil
}
