package pull

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/natstest"
)

// TestAGroupsConsumersTakeTurns: 24 consumers of the group "many", each
// sent 40 events a second, with at most 2 of the group streaming at once
// and turns of 50 ms; one consumer of the group "one" beside them. No
// more than 2 of "many" ever stream, the consumers of "many" handed
// events in a 50 ms window are few (their events come in batches, in
// their turns), every event of every consumer is handed over (no
// consumer starves), and "one" is never made to wait: it streams from
// its start.
func TestAGroupsConsumersTakeTurns(t *testing.T) {
	const (
		many      = 24
		perSecond = 40
		seconds   = 2
		maxStream = 2
		turn      = 50 * time.Millisecond
	)
	p, js := turnsEnv(t, many+1, Config{MaxStreamingPerGroup: maxStream, Turn: turn})

	var (
		mu sync.Mutex
		// handed counts each consumer's events; windows are, per 50 ms
		// window, the consumers of "many" handed an event in it.
		handed      = map[string]int{}
		windows     = map[int64]map[string]bool{}
		mostHolders atomic.Int64
		oneWaited   atomic.Bool
	)
	start := time.Now()
	var acks sync.WaitGroup
	for i := range many + 1 {
		group, consumer := "many", fmt.Sprintf("c%d", i)
		if i == many {
			group = "one"
		}
		var pl *Pull
		pl = p.Add(group, consumer, 10, take(func(m *Msg) {
			// Take runs under the puller's lock: the turns can be read.
			streamingNow := 0
			for _, other := range p.byID {
				if other.group == "many" && other.turn == streaming {
					streamingNow++
				}
			}
			mostHolders.Store(max(mostHolders.Load(), int64(streamingNow), int64(len(p.turns.holders["many"]))))
			if group == "one" && pl.turn != streaming {
				oneWaited.Store(true)
			}
			mu.Lock()
			handed[consumer]++
			if group == "many" {
				w := int64(time.Since(start) / turn)
				if windows[w] == nil {
					windows[w] = map[string]bool{}
				}
				windows[w][consumer] = true
			}
			mu.Unlock()
			acks.Add(1)
			go func() {
				defer acks.Done()
				_ = m.Ack()
				m.Release()
			}()
		}))
		pl.Start()
	}

	// Every consumer is sent perSecond events a second, each at its own
	// moments.
	tick := time.NewTicker(time.Second / perSecond)
	for range perSecond * seconds {
		<-tick.C
		for i := range many + 1 {
			_, err := js.PublishAsync(fmt.Sprintf("ev.%d", i), []byte("x"))
			require.NoError(t, err)
		}
	}
	tick.Stop()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("the events were not stored")
	}

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range many + 1 {
			if handed[fmt.Sprintf("c%d", i)] < perSecond*seconds {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "every consumer is handed all its events")
	acks.Wait()

	assert.LessOrEqual(t, mostHolders.Load(), int64(maxStream), "at most 2 of the group stream at once")
	assert.False(t, oneWaited.Load(), "the consumer of the other group streams from its start")
	mu.Lock()
	defer mu.Unlock()
	var sum, n int
	for _, w := range windows {
		sum += len(w)
		n++
	}
	mean := float64(sum) / float64(n)
	t.Logf("consumers of the group handed events per %v: %.1f on average over %d windows", turn, mean, n)
	// Without turns each of the 24 is handed events in every window; with
	// them about 2 streaming and the probes of the turns passed on.
	assert.Less(t, mean, float64(many)/2, "the group's consumers are handed events in turns, not all at once")
}

// turnsEnv is the stream "events" with consumers c0..c<n-1> (eventsStream)
// and a Puller of them of cfg (its Stream set), beside whose groups
// another has an active pull throughout (contend): each group is held to
// its bound.
func turnsEnv(t *testing.T, n int, cfg Config) (*Puller, jetstream.JetStream) {
	t.Helper()
	p, js := aloneEnv(t, n, cfg)
	p.mu.Lock()
	contend(p)
	p.mu.Unlock()
	return p, js
}

// aloneEnv is turnsEnv with no other group than those of the test's
// pulls.
func aloneEnv(t *testing.T, n int, cfg Config) (*Puller, jetstream.JetStream) {
	t.Helper()
	nc := natstest.Start(t).Connect()
	js := eventsStream(t, nc, n)
	cfg.Stream = "events"
	p, err := Start(nc, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(); <-p.Closed() })
	return p, js
}

// contend counts an active pull of a group named "neighbour", as if one
// had started that is never sent an event: the turns of the tests that
// look at one group's turns apart hold it to its bound (a group alone is
// lent turns past it). No real pull, so that those tests need no consumer
// for it. The puller's mu is held.
func contend(p *Puller) {
	p.turns.present["neighbour"]++
}

// turnsOf is a Puller with no connection, whose turns are of max and turn,
// beside another group's active pull (contend), for the tests of the
// turns' arithmetic.
func turnsOf(max int, turn time.Duration) *Puller {
	p := &Puller{turns: newTurns(max, turn)}
	contend(p)
	return p
}

// oneAtATime is a Config whose groups stream one pull at a time, in
// turns of turn, and whose puller renews requests about every second (an
// expiry of an hour).
func oneAtATime(turn time.Duration) Config {
	return Config{Expiry: time.Hour, MaxStreamingPerGroup: 1, Turn: turn}
}

// startedPulls adds n pulls of group "g" to p, consumers c0, c1, ... with
// batches of 10, each handing its events to the channel returned, and
// starts them in that order.
func startedPulls(p *Puller, n int) ([]*Pull, chan *Msg) {
	got := make(chan *Msg, 10)
	pulls := make([]*Pull, n)
	for i := range pulls {
		pulls[i] = p.Add("g", fmt.Sprintf("c%d", i), 10, take(func(m *Msg) { got <- m }))
	}
	for _, pl := range pulls {
		pl.Start()
	}
	return pulls, got
}

// handOne publishes an event on subject and takes it from got, acknowledged
// and released.
func handOne(t *testing.T, js jetstream.JetStream, subject string, got <-chan *Msg) {
	t.Helper()
	hand(t, js, got, subject)
}

// hand publishes an event on each of subjects, then takes as many from
// got, acknowledged and released.
func hand(t *testing.T, js jetstream.JetStream, got <-chan *Msg, subjects ...string) {
	t.Helper()
	for _, subject := range subjects {
		_, err := js.Publish(context.Background(), subject, []byte("x"))
		require.NoError(t, err)
	}
	for range subjects {
		m := <-got
		require.NoError(t, m.Ack())
		m.Release()
	}
}

// turnOf reads where pl stands in its group's turns.
func turnOf(pl *Pull) turnState {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	return pl.turn
}

// A turn freed while no pull waited (its holder paused) goes to the next
// pull handed an event: it streams, and asks for its whole batch.
func TestAFreedTurnGoesToThePullHandedAnEvent(t *testing.T) {
	p, js := turnsEnv(t, 2, oneAtATime(time.Hour))
	pulls, got := startedPulls(p, 2)
	a, b := pulls[0], pulls[1]
	require.Equal(t, streaming, turnOf(a))
	require.Equal(t, probing, turnOf(b), "the group's one turn is a's")
	a.Pause()
	require.Equal(t, probing, turnOf(a), "a paused gave its turn up, to none")

	for range 4 {
		_, err := js.Publish(context.Background(), "ev.1", []byte("x"))
		require.NoError(t, err)
	}
	for range 4 {
		select {
		case m := <-got:
			require.NoError(t, m.Ack())
			m.Release()
		case <-time.After(5 * time.Second):
			t.Fatal("b was not handed its events: it waits for a turn no one holds")
		}
	}
	assert.Equal(t, streaming, turnOf(b))
}

// A pull that streams and is then handed nothing more gives its turn, once
// its time is over, to a pull handed an event at once, not at the
// puller's next renewal (about a second here).
func TestAnIdleTurnPassesAtOnce(t *testing.T) {
	const turn = 20 * time.Millisecond
	p, js := turnsEnv(t, 2, oneAtATime(turn))
	pulls, got := startedPulls(p, 2)
	a, b := pulls[0], pulls[1]
	require.Equal(t, streaming, turnOf(a))
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return time.Since(a.since) > turn
	}, time.Second, time.Millisecond, "a's time is over")

	handOne(t, js, "ev.1", got)
	require.Eventually(t, func() bool { return turnOf(b) == streaming }, 500*time.Millisecond, time.Millisecond,
		"b streams once a's idle turn passed to it")
	assert.Equal(t, probing, turnOf(a))
}

// While others of its group wait, a streaming pull's requests end with its
// turn (at least minTurnExpiry ahead), so that nothing it asked for comes
// after it; without waiters, or for a pull that probes, they take the
// whole expiry.
func TestRequestsEndWithTheTurn(t *testing.T) {
	p := turnsOf(1, 100*time.Millisecond)
	now := time.Now()
	pl := &Pull{p: p, group: "g"}
	pl.stream(now.Add(-30 * time.Millisecond))
	assert.Equal(t, time.Minute, pl.requestExpiry(time.Minute, now), "no one waits")
	other := &Pull{p: p, group: "g", turn: waiting}
	p.turns.queue["g"] = []*Pull{other}
	assert.Equal(t, 70*time.Millisecond, pl.requestExpiry(time.Minute, now), "what is left of the turn")
	assert.Equal(t, minTurnExpiry, pl.requestExpiry(time.Minute, now.Add(time.Second)), "a turn over: the shortest")
	assert.Equal(t, 50*time.Millisecond, pl.requestExpiry(50*time.Millisecond, now), "never past the expiry")
	prober := &Pull{p: p, group: "g", turn: probing}
	assert.Equal(t, time.Minute, prober.requestExpiry(time.Minute, now), "a pull that probes")
}

// A pull that pauses while it waits for a turn leaves the queue: the
// turn its group's holder gives up later goes to none.
func TestAPausedPullLeavesTheQueue(t *testing.T) {
	p, js := turnsEnv(t, 3, oneAtATime(time.Hour))
	pulls, got := startedPulls(p, 3)
	a, b, c := pulls[0], pulls[1], pulls[2]
	hand(t, js, got, "ev.1", "ev.2")
	require.Eventually(t, func() bool { return turnOf(b) == waiting && turnOf(c) == waiting }, 5*time.Second, time.Millisecond)
	b.Pause()
	assert.Equal(t, probing, turnOf(b))
	a.Pause()
	assert.Equal(t, streaming, turnOf(c), "a's turn goes to c, which still waits")
	assert.Equal(t, probing, turnOf(b), "not to b, which left the queue")
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Empty(t, p.turns.queue)
	assert.Len(t, p.turns.holders["g"], 1)
}

// A turn lasts Config.Turn while up to roundTurns x max pulls wait, and
// shortens past that so that a round of the group's turns lasts about
// roundTurns turns, down to minTurn; a streaming pull gives its turn up
// once the length that the queue gives it is over.
func TestTurnsShortenWithTheQueue(t *testing.T) {
	p := turnsOf(2, 100*time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := func(n int) {
		q := make([]*Pull, n)
		for i := range q {
			q[i] = &Pull{p: p, group: "g", turn: waiting}
		}
		p.turns.queue["g"] = q
	}
	for _, c := range []struct {
		waiting int
		want    time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{32, 100 * time.Millisecond}, // 16 rounds of 2: 16 turns of 100 ms
		{64, 50 * time.Millisecond},  // 32 rounds of 2 in 1.6 s
		{160, 20 * time.Millisecond}, // 80 rounds
		{320, minTurn},               // 160 rounds: 10 ms
		{10000, minTurn},             // not shorter than minTurn
	} {
		wait(c.waiting)
		assert.Equal(t, c.want, p.turns.length("g"), "%d waiting", c.waiting)
	}
	p.turns.turn = 100 * 365 * 24 * time.Hour
	wait(33)
	assert.Equal(t, time.Duration(float64(p.turns.turn)*32/33), p.turns.length("g"), "a turn of a century does not overflow")
	p.turns.turn = 5 * time.Millisecond
	assert.Equal(t, 5*time.Millisecond, p.turns.length("g"), "a turn shorter than minTurn is not made longer")
	p.turns.turn, p.turns.max = 100*time.Millisecond, 0
	assert.Equal(t, 100*time.Millisecond, p.turns.length("g"), "no bound")
	p.turns.max = 2

	now := time.Now()
	a := &Pull{p: p, group: "g", active: true}
	a.stream(now)
	wait(160) // turns of 20 ms
	p.rotate(now.Add(19 * time.Millisecond))
	require.Equal(t, streaming, a.turn, "its 20 ms are not over")
	assert.Equal(t, 15*time.Millisecond, a.requestExpiry(time.Hour, now.Add(5*time.Millisecond)), "its requests end with its shortened turn")
	assert.Equal(t, minTurnExpiry, a.requestExpiry(time.Hour, now.Add(19*time.Millisecond)), "or minTurnExpiry ahead")
	p.rotate(now.Add(20 * time.Millisecond))
	assert.Equal(t, probing, a.turn, "20 ms with 160 waiting: a turn of 100 ms passes at a fifth")
	assert.Len(t, p.turns.queue["g"], 159, "to the first that waited")
}

// A turn passes once it is over, while pulls wait, without an event, a
// request's end or the puller's renewal (about every second): the puller
// looks at the turns again every minTurn while a pull waits.
func TestATurnPassesByItself(t *testing.T) {
	const turn = 30 * time.Millisecond
	p, js := turnsEnv(t, 2, oneAtATime(turn))
	pulls, got := startedPulls(p, 2)
	a, b := pulls[0], pulls[1]
	require.Equal(t, streaming, turnOf(a))
	handOne(t, js, "ev.1", got)
	require.Eventually(t, func() bool { return turnOf(b) == streaming }, 500*time.Millisecond, time.Millisecond,
		"b, handed an event and waiting, streams once a's turn is over, before the renewal")
	assert.Equal(t, probing, turnOf(a))
	p.mu.Lock()
	assert.Empty(t, p.turns.queue)
	p.mu.Unlock()
}

// 150 busy consumers of one group, 1 streaming at once in turns of 50 ms,
// each sent an event every 100 ms for half a second: every event is
// handed within seconds, turns of 10 ms passing in rounds of about 1.5 s.
// When a turn lasted its 50 ms whatever the queue, a round took 149
// turns, 7.5 s (with 1,000 Subscriptions, 8 at once and turns of 250 ms,
// 31 s).
func TestManyBusyConsumersOfAGroupWaitLittle(t *testing.T) {
	const (
		consumers = 150
		events    = 5
	)
	p, js := turnsEnv(t, consumers, Config{MaxStreamingPerGroup: 1, Turn: 50 * time.Millisecond})
	var handed atomic.Int64
	for i := range consumers {
		p.Add("g", fmt.Sprintf("c%d", i), 10, take(func(m *Msg) {
			handed.Add(1)
			go func() { _ = m.Ack(); m.Release() }()
		})).Start()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range events {
		<-tick.C
		for i := range consumers {
			_, err := js.PublishAsync(fmt.Sprintf("ev.%d", i), []byte("x"))
			require.NoError(t, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("the events were not stored")
	}
	stored := time.Now()
	assert.Eventually(t, func() bool { return handed.Load() == consumers*events }, 6*time.Second, 10*time.Millisecond,
		"every event handed within seconds, not one turn of 50 ms after another")
	t.Logf("%d of %d events handed, the last %v after the last was stored", handed.Load(), consumers*events, time.Since(stored).Round(time.Millisecond))
}

// busyCount counts, per window of w from start, the consumers handed an
// event in it.
type busyCount struct {
	mu      sync.Mutex
	start   time.Time
	w       time.Duration
	windows map[int64]map[string]bool
}

// take counts each message handed to consumer, acknowledges and releases it.
func (c *busyCount) take(consumer string) Handler {
	return take(func(m *Msg) {
		c.mu.Lock()
		k := int64(time.Since(c.start) / c.w)
		if c.windows[k] == nil {
			c.windows[k] = map[string]bool{}
		}
		c.windows[k][consumer] = true
		c.mu.Unlock()
		go func() { _ = m.Ack(); m.Release() }()
	})
}

// mean is the consumers handed an event per window, over the windows from
// from to to (from the start).
func (c *busyCount) mean(from, to time.Duration) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum, n int
	for k := int64(from / c.w); k < int64(to/c.w); k++ {
		sum += len(c.windows[k])
		n++
	}
	return float64(sum) / float64(n)
}

// publishEvery publishes an event to each of subjects every 10 ms until
// stop is closed.
func publishEvery(t *testing.T, js jetstream.JetStream, subjects []string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, s := range subjects {
				if _, err := js.PublishAsync(s, []byte("x")); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	return &wg
}

// A group that is the only one with active pulls is lent a turn for each
// of its busy pulls: 12 consumers sent an event every 10 ms, bound 1, are
// all handed events in each window of a turn, not in turns of one at a
// time; once another group's pull starts, the group is held to its bound
// at once (what its lent requests asked for comes within a turn), and is
// lent turns again once that pull paused.
func TestAGroupAloneIsLentTurns(t *testing.T) {
	const (
		busy = 12
		turn = 50 * time.Millisecond
	)
	p, js := aloneEnv(t, busy+1, Config{MaxStreamingPerGroup: 1, Turn: turn})
	count := &busyCount{start: time.Now(), w: turn, windows: map[int64]map[string]bool{}}
	subjects := make([]string, busy)
	for i := range busy {
		c := fmt.Sprintf("c%d", i)
		p.Add("g", c, 10, count.take(c)).Start()
		subjects[i] = fmt.Sprintf("ev.%d", i)
	}
	stop := make(chan struct{})
	publishing := publishEvery(t, js, subjects, stop)
	defer func() { close(stop); publishing.Wait() }()
	holders := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.turns.holders["g"])
	}

	// Alone: every busy pull streams.
	require.Eventually(t, func() bool { return holders() == busy }, 5*time.Second, time.Millisecond,
		"each busy pull of a group alone streams")
	alone := time.Since(count.start)
	time.Sleep(10 * turn) // ten windows of the group alone
	aloneMean := count.mean(alone, time.Since(count.start))

	// Another group's pull starts, never sent an event: the loans end.
	other := p.Add("other", fmt.Sprintf("c%d", busy), 10, take(func(*Msg) {}))
	other.Start()
	assert.Equal(t, 1, holders(), "the group is held to its bound when another group's pull starts")
	contended := time.Since(count.start) + 2*turn // the lent requests end within a turn
	time.Sleep(12 * turn)
	contendedMean := count.mean(contended, time.Since(count.start))
	t.Logf("consumers handed events per %v: %.1f alone, %.1f beside another group's pull", turn, aloneMean, contendedMean)
	assert.Greater(t, aloneMean, float64(busy)-1.5, "alone, every busy consumer is handed events in each turn")
	assert.Less(t, contendedMean, float64(busy)/3, "beside another group's pull, the consumers take turns")

	// The other group's pull paused: lent turns again.
	other.Pause()
	require.Eventually(t, func() bool { return holders() == busy }, 20*turn, time.Millisecond,
		"the group's busy pulls stream again, the other group's pull paused")
}

// A lent turn whose pull is handed nothing for a turn goes back: the pull
// probes again, asking for one event with a request of the whole expiry,
// until the group is at its bound.
func TestAnIdleLentTurnGoesBack(t *testing.T) {
	const turn = 100 * time.Millisecond
	p, js := aloneEnv(t, 3, Config{MaxStreamingPerGroup: 1, Turn: turn, Expiry: time.Hour})
	pulls, got := startedPulls(p, 3)
	for i := range pulls {
		// Two events at once: the second is handed within a turn of the
		// first, and a turn is lent.
		subject := fmt.Sprintf("ev.%d", i)
		hand(t, js, got, subject, subject)
	}
	p.mu.Lock()
	assert.Len(t, p.turns.holders["g"], 3, "each pull handed two events in a turn streams, the group alone")
	// c0 streamed from its start, within the bound: its request is of the
	// whole expiry. The others asked once the group was past it.
	for _, pl := range pulls[1:] {
		assert.LessOrEqual(t, time.Until(pl.expires), turn, "a streaming pull past the bound asks for a turn's time")
	}
	p.mu.Unlock()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.turns.holders["g"]) == 1
	}, 20*turn, time.Millisecond, "idle, the lent turns go back, down to the bound")
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range pulls {
		if pl.turn == probing {
			assert.Equal(t, 1, pl.pending, "a probe asks for one event")
			assert.Greater(t, time.Until(pl.expires), time.Minute, "with a request of the whole expiry")
		}
	}
	assert.Empty(t, p.turns.over)
}

// A group alone past its bound lends a turn to a pull handed its last two
// events within a turn; one handed an event now and then goes on probing
// (a request for one event), where a turn lent, ended unused and asked
// for again would cost three requests for its one event.
func TestATurnIsLentToAPullBusyEnoughToUseIt(t *testing.T) {
	const turn = 100 * time.Millisecond
	p := &Puller{turns: newTurns(1, turn)}
	p.turns.stopped = true // no rotation timer: the test looks at the turns alone
	now := time.Now()
	holder, sparse := &Pull{p: p, group: "g"}, &Pull{p: p, group: "g"}
	for _, pl := range []*Pull{holder, sparse} {
		pl.activate(true, now)
		pl.enter(now)
	}
	require.Equal(t, streaming, holder.turn, "within the bound")
	require.Equal(t, probing, sparse.turn)
	sparse.handed(now)
	assert.Equal(t, probing, sparse.turn, "a first event: no turn lent")
	now = now.Add(turn)
	sparse.handed(now)
	assert.Equal(t, probing, sparse.turn, "the next a turn later: still none")
	assert.Equal(t, 1, sparse.batchNow(), "a probe asks for one event")
	now = now.Add(turn - time.Millisecond)
	sparse.handed(now)
	assert.Equal(t, streaming, sparse.turn, "two events within a turn: a turn lent")
	assert.Equal(t, map[string]struct{}{"g": {}}, p.turns.over)
}

// The turns lent to a group end when another group's pull starts: of
// its streaming pulls, those whose requests end first wait for a turn, in
// that order, and the one whose request ends last keeps streaming.
func TestRecallKeepsThePullsAskingLongest(t *testing.T) {
	p := &Puller{turns: newTurns(1, 100*time.Millisecond)}
	p.turns.stopped = true // no rotation timer: the test looks at the turns alone
	now := time.Now()
	pulls := make([]*Pull, 6)
	for i, ends := range []time.Duration{3, 1, 4, 2, 5, 6} {
		pulls[i] = &Pull{p: p, group: "g", active: true, expires: now.Add(ends * time.Second)}
	}
	pulls[0].stream(now)
	pulls[4].stream(now)
	pulls[4].yield(now) // a lent turn gone back: the group at its bound again
	for _, i := range []int{1, 2, 3, 5} {
		pulls[i].stream(now) // lent again
	}
	pulls[5].yield(now) // a lent turn gone back: the group still past its bound
	p.turns.present["g"] = 4
	p.recall(now)
	assert.Len(t, p.turns.holders["g"], 4, "no other group: the loans stand")
	p.turns.present["other"] = 1
	p.recall(now)
	assert.Equal(t, map[*Pull]struct{}{pulls[2]: {}}, p.turns.holders["g"], "the request ending last keeps its turn")
	assert.Equal(t, []*Pull{pulls[1], pulls[3], pulls[0]}, p.turns.queue["g"], "the others wait, the soonest ending first")
	for _, pl := range p.turns.queue["g"] {
		assert.Equal(t, waiting, pl.turn)
	}
	assert.Empty(t, p.turns.over)
}

// A group is held to its bound while another has an active pull, from
// that pull's start to its pause, however often it starts and pauses.
func TestAnotherGroupsActivePullContends(t *testing.T) {
	p := &Puller{turns: newTurns(1, 100*time.Millisecond)}
	p.turns.stopped = true // no rotation timer: the test looks at the turns alone
	now := time.Now()
	a, b := &Pull{p: p, group: "g"}, &Pull{p: p, group: "other"}
	a.activate(true, now)
	a.activate(true, now)
	assert.False(t, p.turns.contended("g"), "g alone")
	b.activate(true, now)
	assert.True(t, p.turns.contended("g"), "other's pull started")
	assert.True(t, p.turns.contended("other"))
	a.activate(false, now)
	assert.False(t, p.turns.contended("other"), "g's only pull paused, started twice")
	assert.Equal(t, map[string]int{"other": 1}, p.turns.present)
	b.activate(false, now)
	assert.Empty(t, p.turns.present)
	assert.False(t, p.turns.contended("g"))
}

// A group alone with more pulls than its bound, each sent an event now
// and then (more than a turn apart, as 1,000 Subscriptions share a
// namespace's events), costs the server one pull request per event: its
// pulls past the bound probe, each asking for one event at a time, and
// are lent no turn they would not use. Counted on the server's side, by
// a subscriber of the JetStream API's pull requests.
func TestSparsePullsAskOncePerEvent(t *testing.T) {
	const (
		pulls  = 8
		rounds = 4
		turn   = 50 * time.Millisecond
	)
	srv := natstest.Start(t)
	nc := srv.Connect()
	js := eventsStream(t, nc, pulls)
	wc := srv.Connect()
	watch, err := wc.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT.events.>")
	require.NoError(t, err)
	require.NoError(t, watch.SetPendingLimits(-1, -1))
	require.NoError(t, wc.Flush())
	// requests counts the pull requests the server was sent so far: the
	// puller's connection flushed, then the watcher's (the server has
	// passed each on to the watcher by then).
	requests := func() int64 {
		require.NoError(t, nc.Flush())
		require.NoError(t, wc.Flush())
		n, _, err := watch.Pending()
		require.NoError(t, err)
		return int64(n)
	}
	p, err := Start(nc, Config{Stream: "events", MaxStreamingPerGroup: 1, Turn: turn, Expiry: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(); <-p.Closed() })
	all, got := startedPulls(p, pulls)
	require.Eventually(t, func() bool { return requests() == pulls }, 5*time.Second, time.Millisecond, "each pull asks once")

	before := requests()
	for range rounds {
		for i := range all {
			handOne(t, js, fmt.Sprintf("ev.%d", i), got)
		}
		time.Sleep(2 * turn) // each pull's next event more than a turn after its last
	}
	events := int64(rounds * pulls)
	asked := requests() - before
	t.Logf("%d pull requests for %d events", asked, events)
	perEvent := float64(asked) / float64(events)
	assert.LessOrEqual(t, perEvent, 1.25, "about one request per event (the one that took it, asked again)")
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Len(t, p.turns.holders["g"], 1, "no turn lent: the group at its bound")
}
