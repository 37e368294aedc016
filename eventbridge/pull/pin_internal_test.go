package pull

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/natstest"
)

// disconnects is a Handler that records the messages it takes and
// counts the losses of its connection it is told (Disconnected).
type disconnects struct {
	got  chan *Msg
	lost chan struct{}
}

func (d *disconnects) Take(m *Msg) bool { d.got <- m; return true }
func (*disconnects) Handle(*Msg)        {}
func (d *disconnects) Disconnected()    { d.lost <- struct{}{} }

func newDisconnects() *disconnects {
	return &disconnects{got: make(chan *Msg, 16), lost: make(chan struct{}, 4)}
}

// streamWithConsumer starts a NATS server with the stream "events" (ev.>)
// and its consumer "c" of ev.c, explicitly acknowledged, with the rest of
// cfg.
func streamWithConsumer(t *testing.T, cfg jetstream.ConsumerConfig) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	js := srv.JetStream()
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	cfg.Durable, cfg.FilterSubject, cfg.AckPolicy = "c", "ev.c", jetstream.AckExplicitPolicy
	_, err = js.CreateConsumer(ctx, "events", cfg)
	require.NoError(t, err)
	return srv, js
}

// pinOf is the pin p keeps for consumer.
func pinOf(p *Puller, consumer string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pins[consumerOf{p.stream, consumer}]
}

// next waits for a message of h.
func (d *disconnects) next(t *testing.T, why string) *Msg {
	t.Helper()
	select {
	case m := <-d.got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no message: %s", why)
		return nil
	}
}

// A pinned pull asks as a client of the consumer's priority group: the
// server hands the consumer's events to the client it pinned only, each
// with the pin (Msg.Session), and pins another client once the first
// asked for nothing for the pin's time to live; the first, asking again
// with the pin it knew, is refused (423), forgets it and waits. A pull
// that is not pinned carries no session, and a lost connection is told
// to a pinned pull's Handler.
func TestPinnedPullsTakeTurns(t *testing.T) {
	srv, js := streamWithConsumer(t, jetstream.ConsumerConfig{
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"g"}, PinnedTTL: 500 * time.Millisecond})
	ctx := context.Background()
	publish := func(data string) {
		t.Helper()
		_, err := js.Publish(ctx, "ev.c", []byte(data))
		require.NoError(t, err)
	}

	firstConn, secondConn := srv.Connect(), srv.Connect()
	first, err := Start(firstConn, Config{Stream: "events", Expiry: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { first.Stop(); <-first.Closed() })
	second, err := Start(secondConn, Config{Stream: "events", Expiry: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { second.Stop(); <-second.Closed() })

	a, b := newDisconnects(), newDisconnects()
	pa := first.AddPinned("", "c", "g", 4, a)
	pa.Start()
	require.NoError(t, firstConn.Flush()) // asked first: pinned
	pb := second.AddPinned("", "c", "g", 4, b)
	pb.Start()

	publish("1")
	m := a.next(t, "the first client asked first")
	pin := m.Session().Pin
	require.NotEmpty(t, pin, "a pinned client's message carries its pin")
	assert.Equal(t, pin, pinOf(first, "c"), "kept for the pull's next requests")
	require.NoError(t, m.Ack())
	m.Release()
	publish("2")
	m = a.next(t, "the pinned client gets the next too")
	assert.Equal(t, pin, m.Session().Pin)
	require.NoError(t, m.Ack())
	m.Release()
	assert.Empty(t, b.got, "the client not pinned gets nothing")

	// The first stops asking: its pin runs out, and the second is pinned.
	pa.Pause()
	require.Eventually(t, func() bool {
		first.mu.Lock()
		defer first.mu.Unlock()
		return pa.pending == 0
	}, 10*time.Second, 5*time.Millisecond, "the first client's last request expired")
	publish("3")
	m = b.next(t, "the pin went to the second client")
	assert.NotEqual(t, pin, m.Session().Pin, "another pin: another session")
	assert.Equal(t, "3", string(m.Data()))
	require.NoError(t, m.Ack())
	m.Release()

	// The first asks again with its old pin: refused, it forgets it and
	// waits while the second holds the pin.
	pa.Start()
	require.Eventually(t, func() bool { return pinOf(first, "c") == "" }, 10*time.Second, 5*time.Millisecond, "the refused pin is forgotten")
	publish("4")
	m = b.next(t, "the second keeps the pin while it asks")
	require.NoError(t, m.Ack())
	m.Release()
	assert.Empty(t, a.got)
	select {
	case err := <-pa.Lost():
		t.Fatalf("a refused pin is no loss of the pull: %v", err)
	default:
	}

	second.PullOf("c").Remove()
	assert.Empty(t, pinOf(second, "c"), "a consumer no pull serves keeps no pin")

	firstConn.Close()
	select {
	case <-a.lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the pinned pull's Handler was not told its connection was lost")
	}
}

// A pull that is not pinned keeps no session.
func TestAPullNotPinnedHasNoSession(t *testing.T) {
	srv, js := streamWithConsumer(t, jetstream.ConsumerConfig{})
	ctx := context.Background()
	nc := srv.Connect()
	p, err := Start(nc, Config{Stream: "events"})
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(); <-p.Closed() })
	h := newDisconnects()
	p.Add("", "c", 4, h).Start()
	_, err = js.Publish(ctx, "ev.c", []byte("1"))
	require.NoError(t, err)
	m := h.next(t, "an unpinned pull")
	assert.Equal(t, Session{}, m.Session())
}
