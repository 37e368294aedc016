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

// listenBuffer is the capacity of a NATSListener's channel: more than the
// messages its subscriptions can deliver at once under the default bounds
// of listened subjects (each subscription ends after one message).
const listenBuffer = DefaultMaxListenSubjects

// NATSListener listens with core NATS subscriptions, each of which the
// server ends after one message. All of them deliver into one channel,
// read by one goroutine of the listener's (running while it has
// subscriptions), not a goroutine each. A message that finds the channel
// full is dropped (a NATS slow consumer): its Function is then found by
// the next refresh.
type NATSListener struct {
	nc *nats.Conn

	mu      sync.Mutex
	ch      chan *nats.Msg
	watches map[*nats.Subscription]*watch
	quit    chan struct{} // closed to end the running dispatcher; nil when none runs
}

// watch is one Listen call: its subscriptions and what to call.
type watch struct {
	subs []*nats.Subscription
	once sync.Once
	fire func()
}

var _ Listener = (*NATSListener)(nil)

// NewNATSListener returns a listener on the connection nc.
func NewNATSListener(nc *nats.Conn) *NATSListener {
	return &NATSListener{nc: nc, ch: make(chan *nats.Msg, listenBuffer), watches: map[*nats.Subscription]*watch{}}
}

// Listen implements [Listener]. It subscribes to each subject, and
// returns once the server knows every subscription; the error says which
// subject could not be subscribed to, or that the server did not answer
// within 5s.
func (l *NATSListener) Listen(subjects []string, fire func()) (func(), error) {
	w := &watch{subs: make([]*nats.Subscription, 0, len(subjects)), fire: fire}
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { l.stop(w) }) }
	l.mu.Lock()
	for _, subject := range subjects {
		sub, err := l.nc.ChanSubscribe(subject, l.ch)
		if err != nil {
			l.mu.Unlock()
			stop()
			return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
		}
		w.subs = append(w.subs, sub)
		l.watches[sub] = w
		if err := sub.AutoUnsubscribe(1); err != nil && !errors.Is(err, nats.ErrBadSubscription) {
			l.mu.Unlock()
			stop()
			return nil, fmt.Errorf("limit subscription to %s: %w", subject, err)
		}
	}
	if l.quit == nil && len(w.subs) > 0 {
		l.quit = make(chan struct{})
		go l.dispatch(l.quit)
	}
	l.mu.Unlock()
	// The server must know the subscriptions before the caller relies on
	// them.
	if err := l.nc.FlushTimeout(5 * time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("flush subscriptions: %w", err)
	}
	return stop, nil
}

// stop ends w's subscriptions, and the dispatcher when none is left.
func (l *NATSListener) stop(w *watch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sub := range w.subs {
		delete(l.watches, sub)
		// An auto-unsubscribed or closed subscription is already gone.
		_ = sub.Unsubscribe()
	}
	if len(l.watches) == 0 && l.quit != nil {
		close(l.quit)
		l.quit = nil
	}
}

// dispatch calls the fire function of the watch of each message's
// subscription, once a watch, until quit is closed. A message of a
// subscription already stopped is dropped.
func (l *NATSListener) dispatch(quit <-chan struct{}) {
	for {
		select {
		case <-quit:
			return
		case m := <-l.ch:
			l.mu.Lock()
			w := l.watches[m.Sub]
			l.mu.Unlock()
			if w != nil {
				w.once.Do(w.fire)
			}
		}
	}
}
