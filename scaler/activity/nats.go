package activity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamReader reads backlogs from JetStream's consumer API: one paged
// consumer list of each partition of the event stream per read, which in
// a cluster carries each consumer leader's view; a Subscription's backlog
// is the sum of its consumers' in every partition.
type JetStreamReader struct {
	js      jetstream.JetStream
	streams []string

	mu      sync.Mutex
	handles map[string]jetstream.Stream // cached; a stream's is dropped after an error
}

var _ BacklogReader = (*JetStreamReader)(nil)

// NewJetStreamReader returns a reader of the consumers of the named
// streams: the event stream's partitions (stream.Config.PartitionStreams).
func NewJetStreamReader(js jetstream.JetStream, streams ...string) *JetStreamReader {
	return &JetStreamReader{js: js, streams: streams, handles: map[string]jetstream.Stream{}}
}

// Backlogs implements [BacklogReader]: each consumer name's pending and
// unacknowledged events, summed over the streams. The error says which
// stream could not be listed.
func (r *JetStreamReader) Backlogs(ctx context.Context) (map[string]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]uint64{}
	for _, name := range r.streams {
		h := r.handles[name]
		if h == nil {
			var err error
			if h, err = r.js.Stream(ctx, name); err != nil {
				return nil, fmt.Errorf("look up stream %s: %w", name, err)
			}
			r.handles[name] = h
		}
		lister := h.ListConsumers(ctx)
		for info := range lister.Info() {
			out[info.Name] += info.NumPending + uint64(max(info.NumAckPending, 0))
		}
		if err := lister.Err(); err != nil {
			delete(r.handles, name)
			return nil, fmt.Errorf("list consumers of stream %s: %w", name, err)
		}
	}
	return out, nil
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
