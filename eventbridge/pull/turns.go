package pull

import (
	"slices"
	"time"
)

// Turns: how many consumers of one group are pulled at once.
//
// NATS pays for each consumer that is handed events, not for each event:
// the server writes a consumer's state to a file of its own up to ten
// times a second while it changes (nats-server's consumer file store),
// and answers and acknowledges each consumer's requests apart. 100
// consumers of one namespace each handed 15 events a second cost the
// server ten times what 5 consumers handed 300 a second do, for as many
// events (bench/eventbridge -hostile, "fan-out"), and that cost is on the
// server every namespace shares. So a group (the dispatcher's: a
// namespace) has at most Config.MaxStreamingPerGroup of its active pulls
// streaming (asking for their whole batch) at once; its others probe: each
// asks for one event, and once that came it asks for nothing more and
// waits for a turn. A turn goes, in the order they asked, to the pulls
// that wait, when a streaming pull of the group has streamed for
// Config.Turn while others waited, or paused or went away; while others
// wait, a streaming pull's requests end with its turn, so that nothing it
// asked for comes after it. A consumer is so handed events in one turn
// and one probe per round of its group's turns, whatever it is sent
// between them: the events wait in the stream, and come in a batch. A
// group with no more pulls wanting events than its bound sees no
// difference; one with more pays for it in latency, its own, as the pulls
// of its many consumers take turns.
//
// The bound protects the other groups, so it holds only while there is
// another: while a group is the only one with pulls asking for events (a
// single-tenant installation's namespace), it lends a turn to each of its
// pulls busy enough to use one (handed two events within a turn while
// probing), however many; a pull handed an event now and then goes on
// probing, one request per event. Its streaming pulls then ask for no
// more than a turn's worth of time at once, so that
// once another group's pull starts the loans end within a turn (the
// group's streaming pulls past its bound, those whose requests end first,
// wait for a turn as any other). A streaming pull past the bound that is
// handed nothing for a turn gives its turn back and probes again: idle
// consumers ask for one event at a time, with requests of the whole
// expiry, as they do under the bound. Another group counts from its
// pull's start, not from its first event: a group sent an event now and
// then, or whose events another replica is handed (pinned pulls), is
// protected from its first event on.

// turnState is where an active pull stands in its group's turns.
type turnState uint8

const (
	// probing: no turn, asking for one event at a time.
	probing turnState = iota
	// waiting: no turn, handed an event while probing: asks for nothing
	// until it gets one (in its group's queue).
	waiting
	// streaming: holds one of its group's turns, asks for its batch.
	streaming
)

// turns are the groups' turns: the streaming pulls of each, and the pulls
// waiting for one, in order. Guarded by the puller's mu.
type turns struct {
	// max is the streaming pulls a group may have at once, turn how long
	// one streams at most while others wait; max 0 means no bound.
	max  int
	turn time.Duration
	// holders are each group's streaming pulls; queue is each group's
	// waiting pulls, in the order they asked.
	holders map[string]map[*Pull]struct{}
	queue   map[string][]*Pull
	// rotating: the rotation timer is armed (rotateSoon); stopped: the
	// puller stopped, no timer is armed any more.
	rotating, stopped bool
	// present counts each group's active pulls (those asking for
	// events), for the groups that have any; over are the groups with
	// more streaming pulls than max (turns lent while alone).
	present map[string]int
	over    map[string]struct{}
}

// newTurns returns the turns of groups of at most max streaming pulls
// (no bound when 0 or less), turn long.
func newTurns(max int, turn time.Duration) turns {
	return turns{max: max, turn: turn, holders: map[string]map[*Pull]struct{}{}, queue: map[string][]*Pull{},
		present: map[string]int{}, over: map[string]struct{}{}}
}

// contended reports whether a group other than group has active pulls:
// group is then held to its bound. The puller's mu is held.
func (t *turns) contended(group string) bool {
	_, in := t.present[group]
	if in {
		return len(t.present) > 1
	}
	return len(t.present) > 0
}

// activate counts the pull's start or end of asking for events in its
// group's presence; a group's first active pull ends the turns lent to
// the others (recall). The puller's mu is held.
func (pl *Pull) activate(active bool, now time.Time) {
	if pl.active == active {
		return
	}
	pl.active = active
	t := &pl.p.turns
	if t.max <= 0 {
		return
	}
	if !active {
		if t.present[pl.group]--; t.present[pl.group] <= 0 {
			delete(t.present, pl.group)
		}
		return
	}
	t.present[pl.group]++
	if t.present[pl.group] == 1 {
		pl.p.recall(now)
	}
}

// batchNow is how many events the pull asks for at once where it stands.
// The puller's mu is held.
func (pl *Pull) batchNow() int {
	if pl.p.turns.max <= 0 {
		return pl.batch
	}
	switch pl.turn {
	case streaming:
		return pl.batch
	case probing:
		return 1
	default:
		return 0
	}
}

// enter places a pull that starts asking: streaming if its group has a
// turn free, probing otherwise. The puller's mu is held.
func (pl *Pull) enter(now time.Time) {
	t := &pl.p.turns
	if t.max <= 0 || pl.turn == streaming {
		return
	}
	if pl.turn == waiting {
		return // in the queue already
	}
	if len(t.holders[pl.group]) < t.max {
		pl.stream(now)
		return
	}
	pl.turn = probing
}

// stream gives the pull one of its group's turns. The puller's mu is held.
func (pl *Pull) stream(now time.Time) {
	t := &pl.p.turns
	h := t.holders[pl.group]
	if h == nil {
		h = map[*Pull]struct{}{}
		t.holders[pl.group] = h
	}
	h[pl] = struct{}{}
	pl.turn, pl.since = streaming, now
	if len(h) > t.max {
		t.over[pl.group] = struct{}{}
	}
}

// leave takes the pull out of its group's turns and presence (it pauses,
// fails, or goes away: it asks for nothing more): its turn, if it had one,
// goes to the next in the queue. The puller's mu is held.
func (pl *Pull) leave(now time.Time) {
	pl.activate(false, now)
	t := &pl.p.turns
	if t.max <= 0 {
		return
	}
	switch pl.turn {
	case streaming:
		pl.yield(now)
	case waiting:
		q := t.queue[pl.group]
		for i, w := range q {
			if w == pl {
				q = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		pl.setQueue(q)
		pl.turn = probing
	}
}

// handed is told of each event the pull is handed: a probing pull then
// waits for a turn; a streaming one gives its turn up when others wait and
// its time is over. The puller's mu is held.
func (pl *Pull) handed(now time.Time) {
	t := &pl.p.turns
	if t.max <= 0 || !pl.active {
		return
	}
	previous := pl.lastHanded
	pl.lastHanded = now
	switch pl.turn {
	case probing:
		if len(t.holders[pl.group]) < t.max && len(t.queue[pl.group]) == 0 {
			pl.stream(now) // a turn free
			return
		}
		if !t.contended(pl.group) {
			// No other group asks for events: a turn is lent to a pull
			// busy enough to use one (handed this event within a turn
			// of its last). One handed an event now and then goes on asking
			// for one at a time: a streaming request lent for a turn,
			// ended unused and asked for again as a probe, would cost
			// the server three requests for its one event.
			if !previous.IsZero() && now.Sub(previous) < t.turn {
				pl.stream(now)
			}
			return
		}
		pl.turn = waiting
		pl.setQueue(append(t.queue[pl.group], pl))
		pl.p.yieldIdle(pl.group, now)
	case streaming:
		pl.yieldIfOver(now)
	}
}

// roundTurns is how many turns of Config.Turn a round of a group's turns
// (each of its waiting pulls streaming once) lasts at most, as long as
// its turns are longer than minTurn: Config.Turn for up to roundTurns x
// Config.MaxStreamingPerGroup waiting pulls (128 of a namespace by
// default, more than the 100 Subscriptions a namespace gets consumers for
// by default: within the defaults every turn is Config.Turn), shorter
// past that. A busy pull so waits at most about 4 s (16 turns of 250 ms)
// for its next turn however many busy pulls its group has (down to turns
// of minTurn), while as few of them are handed events at once as before.
// Shorter rounds (4 turns) served 100 busy Subscriptions of a hostile
// namespace faster and made the machine refuse the victim's publishes
// (bench/eventbridge -hostile "many Subscriptions": the victim's
// publishes answered 429 in each of 5 runs, in none of 4 with whole
// turns).
const roundTurns = 16

// minTurn is the shortest turn: about what a pull request takes to be
// answered with the events its consumer holds.
const minTurn = 10 * time.Millisecond

// length is how long a streaming pull of group keeps its turn while
// others of its group wait: Config.Turn, or with more than roundTurns x
// max waiting, roundTurns x Config.Turn over the rounds they need, not
// shorter than minTurn (nor than Config.Turn, when that is shorter).
// The puller's mu is held.
func (t *turns) length(group string) time.Duration {
	waiting := len(t.queue[group])
	if waiting <= roundTurns*t.max || t.max <= 0 {
		return t.turn
	}
	// In floating point: an operator's turn of years times the bound
	// would overflow.
	share := time.Duration(float64(t.turn) * float64(roundTurns*t.max) / float64(waiting))
	return max(min(share, t.turn), min(minTurn, t.turn))
}

// yieldIfOver gives a streaming pull's turn up when others of its group
// wait and its turn's length is over (an event handed, a request ended,
// the puller's rotation). The puller's mu is held.
func (pl *Pull) yieldIfOver(now time.Time) {
	t := &pl.p.turns
	if pl.turn != streaming {
		return
	}
	over := len(t.queue[pl.group]) > 0 && now.Sub(pl.since) >= t.length(pl.group)
	// A lent turn (the group past its bound) of a pull handed nothing for
	// a turn goes back: it probes again.
	last := pl.since
	if pl.lastHanded.After(last) {
		last = pl.lastHanded
	}
	idle := len(t.holders[pl.group]) > t.max && now.Sub(last) >= t.turn
	if over || idle {
		pl.yield(now)
	}
}

// requestExpiry is how long the pull's next request may wait: expiry,
// or while others of its group wait for a turn, what is left of the
// streaming pull's, so that nothing it asks for comes after its turn. The
// puller's mu is held.
func (pl *Pull) requestExpiry(expiry time.Duration, now time.Time) time.Duration {
	t := &pl.p.turns
	switch {
	case pl.turn != streaming:
		return expiry
	case len(t.queue[pl.group]) > 0:
		return min(expiry, max(pl.since.Add(t.length(pl.group)).Sub(now), minTurnExpiry))
	case len(t.holders[pl.group]) > t.max:
		return min(expiry, t.turn) // turns lent: they end within a turn once another group's pull starts
	default:
		return expiry
	}
}

// minTurnExpiry is the shortest request of a streaming pull whose turn
// ends.
const minTurnExpiry = 10 * time.Millisecond

// yield gives the pull's turn to the next in its group's queue; the pull
// probes. The puller's mu is held.
func (pl *Pull) yield(now time.Time) {
	t := &pl.p.turns
	pl.turn = probing
	h := t.holders[pl.group]
	delete(h, pl)
	if len(h) == 0 {
		delete(t.holders, pl.group)
	}
	if len(h) <= t.max {
		delete(t.over, pl.group)
	}
	q := t.queue[pl.group]
	if len(q) == 0 || len(h) >= t.max {
		return // none waits, or the group is still at its bound (a lent turn went back)
	}
	next := q[0]
	q[0] = nil
	next.setQueue(q[1:])
	next.stream(now)
	next.topUp()
}

// setQueue sets the pull's group's queue, and has the puller look at the
// turns again every minTurn while a queue waits. The puller's mu is held.
func (pl *Pull) setQueue(q []*Pull) {
	if len(q) == 0 {
		delete(pl.p.turns.queue, pl.group)
		return
	}
	pl.p.turns.queue[pl.group] = q
	pl.p.rotateSoon()
}

// yieldIdle takes the turns of group's streaming pulls that streamed for
// their time, for the pulls waiting: one that is handed nothing more
// would otherwise keep its turn. The puller's mu is held.
func (p *Puller) yieldIdle(group string, now time.Time) {
	t := &p.turns
	for pl := range t.holders[group] {
		if len(t.queue[group]) == 0 {
			return
		}
		pl.yieldIfOver(now) // deletes pl from the map ranged over: allowed
	}
}

// rotate passes on the turns held for their length in every group where
// pulls wait, and lends a turn to each waiting pull of a group that is
// the only one left with active pulls (the puller's tick, and its
// rotation timer). The puller's mu is held.
func (p *Puller) rotate(now time.Time) {
	for group, q := range p.turns.queue {
		if p.turns.contended(group) {
			p.yieldIdle(group, now)
			continue
		}
		delete(p.turns.queue, group) // allowed while ranging over it
		for _, pl := range q {
			pl.stream(now)
			pl.topUp()
		}
	}
}

// recall ends the turns lent to the groups past their bound now that
// another group has an active pull: of each such group's streaming pulls, those
// whose requests end first wait for a turn, in that order, until the
// group is at its bound (what they asked for still comes, within a turn:
// requestExpiry). The puller's mu is held.
func (p *Puller) recall(now time.Time) {
	t := &p.turns
	for group := range t.over {
		h := t.holders[group]
		if len(h) <= t.max {
			delete(t.over, group)
			continue
		}
		if !t.contended(group) {
			continue
		}
		lent := make([]*Pull, 0, len(h))
		for pl := range h {
			lent = append(lent, pl)
		}
		slices.SortFunc(lent, func(a, b *Pull) int { return a.expires.Compare(b.expires) })
		q := t.queue[group]
		for _, pl := range lent[:max(len(lent)-t.max, 0)] {
			delete(h, pl)
			pl.turn = waiting
			q = append(q, pl)
		}
		delete(t.over, group)
		lent[0].setQueue(q)
	}
}

// rotateSoon has the puller rotate the turns in minTurn (or Config.Turn
// if shorter), and again after that while pulls wait: a streaming pull
// whose turn is over, handed nothing more and whose request was made
// before others waited, is told of it by no event, no request's end (turns
// shorten as the queue grows). One timer serves every group; none runs
// while no pull waits. The puller's mu is held.
func (p *Puller) rotateSoon() {
	if p.turns.rotating || p.turns.stopped {
		return
	}
	p.turns.rotating = true
	time.AfterFunc(min(minTurn, p.turns.turn), func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.turns.rotating = false
		if p.turns.stopped || len(p.turns.queue) == 0 {
			return
		}
		p.rotate(time.Now())
		if len(p.turns.queue) > 0 {
			p.rotateSoon()
		}
	})
}
