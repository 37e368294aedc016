package pull

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/natsfault"
	"github.com/kfn-dev/kfn/test/natstest"
)

// natsThatVanishes is a NATS server reached through a proxy (file store,
// so that a restart keeps the stream), with a stream "events" and, for
// each of n consumers c<i>, its subject ev.<i>. vanish makes the server
// go without a word to the client, as when it is killed: the proxy cuts
// the connection before the server restarts, so its shutdown notice (a
// 409 to every pull request, which resets the pulls on its own) reaches
// nobody, and the restarted server knows none of the requests asked
// before; then the client may connect again.
func natsThatVanishes(t *testing.T, n int) (nc *nats.Conn, js jetstream.JetStream, vanish func()) {
	t.Helper()
	srv := natstest.Start(t)
	proxy := natsfault.Start(t, srv.URL())
	nc, err := nats.Connect(proxy.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js = eventsStream(t, nc, n)
	reconnects := nc.Stats().Reconnects
	return nc, js, func() {
		proxy.Partition()
		srv.Restart()
		proxy.Heal()
		require.Eventually(t, func() bool { return nc.IsConnected() && nc.Stats().Reconnects > reconnects }, 10*time.Second, 10*time.Millisecond,
			"the client is connected to the restarted server")
	}
}

// eventsStream makes, through nc, the stream "events" (file storage, so
// that a restart keeps it) with consumers c0..c<n-1>, c<i> of subject
// ev.<i>.
func eventsStream(t *testing.T, nc *nats.Conn, n int) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	for i := range n {
		_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%d", i),
			FilterSubject: fmt.Sprintf("ev.%d", i), AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err)
	}
	return js
}

// receives waits for one event on each channel, with the data want[i].
func receives(t *testing.T, got []chan jetstream.Msg, want func(i int) string, why string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for i, ch := range got {
		select {
		case m := <-ch:
			require.Equal(t, want(i), string(m.Data()))
			require.NoError(t, m.Ack())
		case <-timeout:
			t.Fatalf("consumer c%d: the event published after the reconnect was not delivered: %s", i, why)
		}
	}
}

// After the NATS server vanished without a goodbye (killed, or the
// network lost) and the connection is back, every pull asks again at once:
// the requests it asked before are gone with the server, and nothing will
// tell their end (no 408 at their expiry, an hour here, nor a 409).
func TestEveryPullAsksAgainAfterTheServerVanished(t *testing.T) {
	const consumers = 3
	nc, js, vanish := natsThatVanishes(t, consumers)
	p, err := Start(nc, Config{Stream: "events", Expiry: time.Hour}) // no request of the test expires by itself
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(); <-p.Closed() })
	var got []chan jetstream.Msg
	var pulls []*Pull
	for i := range consumers {
		ch := make(chan jetstream.Msg, 10)
		pl := p.Add("", fmt.Sprintf("c%d", i), 2, take(func(m *Msg) { ch <- m }))
		pl.Start()
		got, pulls = append(got, ch), append(pulls, pl)
	}
	require.NoError(t, nc.Flush()) // the requests are on the server

	vanish()
	for i := range consumers {
		_, err := js.Publish(context.Background(), fmt.Sprintf("ev.%d", i), []byte("after"))
		require.NoError(t, err)
	}
	receives(t, got, func(int) string { return "after" }, "its lost request was not asked again")
	for i, pl := range pulls {
		select {
		case err := <-pl.lost:
			t.Errorf("pull c%d lost: %v", i, err)
		default:
		}
	}
}

// A reconnect whose status event never reached the puller (nats.go drops
// an event its listener has no room for, and tells none from before the
// listener existed) is noticed at the next renewal: the requests lost with
// the old connection are asked again then, not after their expiry.
//
// The test drives the puller without run, so that it reads no status
// event: renew is what run's ticker calls.
func TestPullerAsksAgainAfterAnUntoldReconnect(t *testing.T) {
	nc, js, vanish := natsThatVanishes(t, 1)
	p := newPuller(nc, "events", time.Hour, heldBytes{}) // no request of the test expires by itself
	require.NoError(t, p.listen())
	got := make(chan jetstream.Msg, 10)
	pl := p.Add("", "c0", 1, take(func(m *Msg) { got <- m }))
	pl.Start()
	require.NoError(t, nc.Flush()) // the request is on the server

	// The puller was told that the connection is reconnecting, and is
	// told nothing more.
	p.mu.Lock()
	p.followLocked(false, 0)
	p.mu.Unlock()
	vanish()
	p.renew(time.Now())

	_, err := js.Publish(context.Background(), "ev.0", []byte("after the restart"))
	require.NoError(t, err)
	receives(t, []chan jetstream.Msg{got}, func(int) string { return "after the restart" }, "the lost request was not asked again")
}

// TestPullerKeepsToItsByteBounds: events of about 100 KiB, a pull that may
// hold 250 KiB and a puller that may hold 350 KiB for all its pulls: the
// worker is given two events, not the ten its batch asks for, and one
// more only once it releases one; a second Subscription gets the room
// left of the total, one event (and, paused, none of what the first
// releases); and an event larger than the room is
// still given, alone, to a pull that holds nothing.
func TestPullerKeepsToItsByteBounds(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	for _, c := range []string{"a", "b"} {
		_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: c, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ev." + c})
		require.NoError(t, err)
	}
	data := make([]byte, 100<<10)
	for range 10 {
		_, err = js.Publish(ctx, "ev.a", data)
		require.NoError(t, err)
		_, err = js.Publish(ctx, "ev.b", data)
		require.NoError(t, err)
	}

	p := newPuller(nc, "events", time.Hour, heldBytes{total: 350 << 10, perPull: 250 << 10})
	require.NoError(t, p.listen())
	got := map[string]chan *Msg{"a": make(chan *Msg, 10), "b": make(chan *Msg, 10)}
	pa := p.Add("a", "a", 10, take(func(e *Msg) { got["a"] <- e }))
	pa.Start()
	count := func(c string) int { return len(got[c]) }
	require.Eventually(t, func() bool { return count("a") == 2 }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return count("a") > 2 }, 200*time.Millisecond, 5*time.Millisecond, "250 KiB hold two events of 100 KiB")

	pb := p.Add("b", "b", 10, take(func(e *Msg) { got["b"] <- e }))
	pb.Start()
	require.Eventually(t, func() bool { return count("b") == 1 }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return count("b") > 1 }, 200*time.Millisecond, 5*time.Millisecond, "the total's 350 KiB leave room for one more")

	// b wants room too: paused, it does not take what a releases (which
	// one of two pulls wanting room gets it is the order of their asking).
	pb.Pause()
	for _, e := range drain(got["a"]) {
		require.NoError(t, e.Ack())
		e.Release()
	}
	require.Eventually(t, func() bool { return count("a") == 2 }, 5*time.Second, time.Millisecond, "released, more given")
	require.Never(t, func() bool { return count("a") > 2 || count("b") > 1 }, 200*time.Millisecond, 5*time.Millisecond)

	// Room for less than one event: a pull that holds nothing still gets one.
	p.mu.Lock()
	p.bounds = heldBytes{perPull: 50 << 10}
	p.mu.Unlock()
	for _, e := range drain(got["b"]) {
		e.Release()
	}
	pb.Start()
	require.Eventually(t, func() bool { return count("b") == 1 }, 5*time.Second, time.Millisecond, "an event larger than the room, alone")
	require.Never(t, func() bool { return count("b") > 1 }, 200*time.Millisecond, 5*time.Millisecond)
}

// TestPullerKeepsAQuarterOfItsBytesForGroupsHoldingLess: the pulls of a
// group (a namespace) whose many consumers hold events take at most three
// quarters of MaxHeldBytes, and a pull of it that holds nothing is sent
// no event past them (only a group that holds nothing may be sent one of
// any size); the last quarter is left to a group that holds less, whose
// pull is sent events to fill it instead of one at a time.
func TestPullerKeepsAQuarterOfItsBytesForGroupsHoldingLess(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	consumers := []string{"m0", "m1", "m2", "m3", "v"}
	for _, c := range consumers {
		_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: c, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ev." + c})
		require.NoError(t, err)
	}
	data := make([]byte, 40<<10) // and about 100 bytes of subject and headers
	for range 10 {
		for _, c := range consumers {
			_, err = js.Publish(ctx, "ev."+c, data)
			require.NoError(t, err)
		}
	}

	p := newPuller(nc, "events", time.Hour, heldBytes{total: 400 << 10, perPull: 200 << 10})
	require.NoError(t, p.listen())
	got := map[string]chan *Msg{}
	count := func(cs ...string) (n int) {
		for _, c := range cs {
			n += len(got[c])
		}
		return n
	}
	// settled waits until no more events come for the consumers.
	settled := func(cs ...string) int {
		last := -1
		require.Eventually(t, func() bool {
			n := count(cs...)
			defer func() { last = n }()
			return n == last
		}, 5*time.Second, 100*time.Millisecond)
		return last
	}
	mallory := consumers[:4]
	for _, c := range mallory { // one at a time, so that no two requests ask for the same room
		ch := make(chan *Msg, 10) // the handler's own: got is the test goroutine's
		got[c] = ch
		p.Add("mallory", c, 10, take(func(e *Msg) { ch <- e })).Start()
		settled(c)
	}
	// m0: 200 KiB hold 4; m1: 3 more reach 300 KiB, three quarters; m2,
	// m3: none.
	assert.Equal(t, []int{4, 3, 0, 0}, []int{count("m0"), count("m1"), count("m2"), count("m3")})

	v := make(chan *Msg, 10)
	got["v"] = v
	p.Add("bank", "v", 10, take(func(e *Msg) { v <- e })).Start()
	require.Eventually(t, func() bool { return count("v") == 2 }, 5*time.Second, time.Millisecond,
		"the other namespace is sent the kept quarter's 100 KiB")
	assert.Equal(t, 2, settled("v"))
}

func drain(c chan *Msg) []*Msg {
	var out []*Msg
	for {
		select {
		case e := <-c:
			out = append(out, e)
		default:
			return out
		}
	}
}

// take is a Handler that takes every message to f (which must not block),
// and handles none.
type take func(*Msg)

func (f take) Take(m *Msg) bool { f(m); return true }
func (take) Handle(*Msg)        {}

// TestGrowCountsWithinTheByteBounds: bytes a holder keeps for a message
// (Grow) count against the bounds as the message's own, until Shrink or
// Release: they are refused past the room left, unless the message is all
// its pull holds.
func TestGrowCountsWithinTheByteBounds(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events", Subjects: []string{"ev.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	_, err = js.CreateConsumer(ctx, "events", jetstream.ConsumerConfig{Durable: "a", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ev.a"})
	require.NoError(t, err)
	data := make([]byte, 100<<10)
	for range 2 {
		_, err = js.Publish(ctx, "ev.a", data)
		require.NoError(t, err)
	}

	p := newPuller(nc, "events", time.Hour, heldBytes{total: 1 << 20, perPull: 250 << 10})
	require.NoError(t, p.listen())
	got := make(chan *Msg, 10)
	pl := p.Add("", "a", 10, take(func(e *Msg) { got <- e }))
	pl.Start()
	require.Eventually(t, func() bool { return len(got) == 2 }, 5*time.Second, time.Millisecond)
	first, second := <-got, <-got
	held := func() (int64, int64) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return pl.held, p.held
	}
	events, _ := held()

	require.ErrorIs(t, first.Grow(100<<10), ErrNoRoom, "two events of 100 KiB leave less than 50 KiB")
	require.NoError(t, first.Grow(40<<10))
	inPull, inAll := held()
	assert.Equal(t, events+40<<10, inPull)
	assert.Equal(t, events+40<<10, inAll)
	first.Shrink(40 << 10)
	inPull, _ = held()
	assert.Equal(t, events, inPull)

	// What a message gives up growing for it gives back with the refusal.
	require.NoError(t, first.Grow(30<<10))
	require.ErrorIs(t, first.GrowOrGiveBack(30<<10, 30<<10), ErrNoRoom)
	inPull, inAll = held()
	assert.Equal(t, events, inPull, "refused, its 30 KiB are given back in the same step")
	assert.Equal(t, events, inAll)
	require.NoError(t, second.GrowOrGiveBack(40<<10, 0), "the room is the other message's")
	second.Shrink(40 << 10)

	second.Release()
	require.NoError(t, first.Grow(1<<20), "a message alone may keep more than the room")
	first.Release()
	inPull, inAll = held()
	assert.Zero(t, inPull, "released, the message counts off what it grew")
	assert.Zero(t, inAll)
	require.NoError(t, first.Grow(1<<30), "a released message counts nothing")
	first.Shrink(1 << 30)
	inPull, _ = held()
	assert.Zero(t, inPull)
}

// TestOneConsumerNameInTwoStreams: a Subscription's consumer has one name
// in every partition of the event stream; one Puller pulls each, and each
// event goes to the pull of its own stream.
func TestOneConsumerNameInTwoStreams(t *testing.T) {
	nc, err := nats.Connect(natstest.Start(t).URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js := eventsStream(t, nc, 1)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "events-1", Subjects: []string{"p1.>"}})
	require.NoError(t, err)
	_, err = js.CreateConsumer(ctx, "events-1", jetstream.ConsumerConfig{Durable: "c0", FilterSubject: "p1.ev.0", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	p, err := Start(nc, Config{Stream: "events"})
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(); <-p.Closed() })
	got := []chan jetstream.Msg{make(chan jetstream.Msg, 10), make(chan jetstream.Msg, 10)}
	p.Add("", "c0", 2, take(func(m *Msg) { got[0] <- m })).Start()
	p.AddIn("events-1", "", "c0", "", 2, take(func(m *Msg) { got[1] <- m })).Start()
	require.NoError(t, nc.Flush())

	for _, subject := range []string{"ev.0", "p1.ev.0"} {
		_, err := js.Publish(ctx, subject, []byte(subject))
		require.NoError(t, err)
	}
	receives(t, got, func(i int) string { return []string{"ev.0", "p1.ev.0"}[i] }, "not pulled from its stream")
	require.Never(t, func() bool { return len(got[0])+len(got[1]) > 0 }, 200*time.Millisecond, 10*time.Millisecond, "each event once, to its own stream's pull")
}
