package deadletter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/replay"
	"github.com/kfn-dev/kfn/internal/auth"
)

// Errors of Admin.
var (
	// ErrNotFound: no dead letter has that sequence.
	ErrNotFound = errors.New("dead letter not found")
	// ErrInvalidFilter: the filter cannot select dead letters.
	ErrInvalidFilter = errors.New("invalid dead-letter filter")
	// ErrNoSubscription: the dead letter's Subscription has no consumer to
	// replay it to.
	ErrNoSubscription = errors.New("the dead letter's Subscription has no consumer")
)

// Admin lists, replays and deletes dead letters. It is safe for concurrent
// use.
type Admin struct {
	js      jetstream.JetStream
	streams stream.Config
	events  *eventstore.Store
	filters replay.Filters
	access  Access
}

// Access decides what the caller of a request to Handler may do with dead
// letters (auth.Kubernetes, behind its Authenticate): a nil error allows;
// an error wrapping auth.ErrUnauthenticated is answered 401, any other
// 403 with its message. The attributes are a verb on the subresource
// deadletters of Subscriptions (Resource) in the letters' namespace, ""
// for a listing of every namespace: "list" to list, "get" to read one,
// "update" to replay, "delete" to delete.
type Access interface {
	Allow(r *http.Request, a auth.Attributes) error
}

// Resource is what Access is asked about: the subresource deadletters of
// eventing.kyma-project.io's subscriptions, which an RBAC rule grants as
// "subscriptions/deadletters".
var Resource = auth.Attributes{Group: "eventing.kyma-project.io", Resource: "subscriptions", Subresource: "deadletters"}

// AdminOption configures an Admin.
type AdminOption func(*Admin)

// WithAccess makes Handler ask access before it lists, reads, replays or
// deletes; without it, the handler serves whoever reaches it (kfn dev,
// whose listener is the user's own).
func WithAccess(access Access) AdminOption { return func(a *Admin) { a.access = access } }

// NewAdmin returns an Admin over the given streams.
func NewAdmin(js jetstream.JetStream, streams stream.Config, opts ...AdminOption) (*Admin, error) {
	if err := streams.Validate(); err != nil {
		return nil, err
	}
	a := &Admin{js: js, streams: streams, events: eventstore.New(js, streams.EventStream),
		filters: replay.Filters{JetStream: js, Streams: streams}}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// Get returns one dead letter; the error wraps ErrNotFound when there is
// none with that sequence.
func (a *Admin) Get(ctx context.Context, seq uint64) (Letter, error) {
	m, err := a.get(ctx, seq)
	if err != nil {
		return Letter{}, err
	}
	return letter(seq, m.Header, m.Data), nil
}

func (a *Admin) get(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	s, err := a.js.Stream(ctx, a.streams.DeadLetterStream)
	if err != nil {
		return nil, fmt.Errorf("open dead-letter stream: %w", err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("get dead letter %d: %w", seq, err)
	}
	return m, nil
}

// Replay publishes a dead letter again to the Subscription it came from,
// and only to it (on that Subscription's replay subject, which only its
// consumer filters on, see package replay), then deletes it from the
// dead-letter stream. The event gets a fresh set of delivery attempts. A
// replay repeated after a crash between the two steps is stored once (its
// message id is derived from the dead letter's sequence). The error wraps
// ErrNotFound when there is no dead letter with that sequence, and
// ErrNoSubscription (the dead letter is kept) when its Subscription has no
// consumer.
func (a *Admin) Replay(ctx context.Context, seq uint64) (Letter, error) {
	m, err := a.get(ctx, seq)
	if err != nil {
		return Letter{}, err
	}
	l := letter(seq, m.Header, m.Data)
	h := make(nats.Header, len(m.Header))
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Kfn-") && !strings.HasPrefix(k, "Nats-") {
			h[k] = v
		}
	}
	consumer := m.Header.Get(HeaderConsumer)
	if consumer == "" {
		consumer = stream.ConsumerName(l.Namespace, l.Subscription)
	}
	release, err := a.filters.Hold(ctx, consumer)
	if errors.Is(err, replay.ErrNoConsumer) {
		return Letter{}, fmt.Errorf("replay dead letter %d: %w: %s/%s (deleted, or its spec cannot be served)", seq, ErrNoSubscription, l.Namespace, l.Subscription)
	}
	if err != nil {
		return Letter{}, fmt.Errorf("replay dead letter %d: %w", seq, err)
	}
	msg := &nats.Msg{Subject: stream.ReplaySubject(consumer), Header: h, Data: m.Data}
	_, err = a.events.Put(ctx, eventstore.Restore(msg, "replay:"+a.streams.DeadLetterStream+":"+strconv.FormatUint(seq, 10)))
	release()
	if err != nil {
		return Letter{}, fmt.Errorf("replay dead letter %d: %w", seq, err)
	}
	if err := a.Delete(ctx, seq); err != nil && !errors.Is(err, ErrNotFound) {
		return Letter{}, err
	}
	return l, nil
}

// Delete removes a dead letter; the error wraps ErrNotFound when there is
// none with that sequence.
func (a *Admin) Delete(ctx context.Context, seq uint64) error {
	s, err := a.js.Stream(ctx, a.streams.DeadLetterStream)
	if err != nil {
		return fmt.Errorf("open dead-letter stream: %w", err)
	}
	err = s.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	if err != nil {
		return fmt.Errorf("delete dead letter %d: %w", seq, err)
	}
	return nil
}
