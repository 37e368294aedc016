package slots

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// How the dispatcher's work is shared among namespaces.
//
// Every event a worker takes, first attempt or retry, is a turn: the
// dispatcher's work for one attempt, from reading the event through the
// request and the sink's answer to storing its reply and settling the
// event (acknowledging, retrying, dead-lettering). At most
// Config.DeliverySlots turns run at once. While slots are free a turn
// runs at once, so a namespace alone may use them nearly all; when none
// is, turns wait in a queue of their namespace, and each slot that frees
// goes to the waiting namespace that runs the fewest turns (in turn among
// equals), oldest turn first. So under contention every namespace with
// work runs an equal share of the slots, whatever its fan-out, retries or
// event sizes: a namespace whose 300 Subscriptions take one event each
// waits behind its own events, not in front of another's, and its
// deliveries proceed at its share of what the machine does, and so does
// the work they set off (the sinks' requests, the acknowledgements
// JetStream stores).
//
// A quarter of the slots is kept for namespaces that run fewer turns than
// that quarter: a namespace that takes the other slots, its sink slow,
// does not make the next namespace wait for one of them to free.
//
// With WithPerNamespace, a namespace also runs at most that many turns
// while another namespace is active (turns waiting, or a slot in the last
// ActiveSlotTimes), though slots are free: a burst of one namespace's
// deliveries costs another by how many run at once, whatever the slots
// they hold.
//
// A sink that never answers must not keep its slot, nor a sink that has
// no ready endpoint: a turn gives its slot back while it waits for its
// sink to be ready (pause), and holds it for one to two SlotTimes at most
// (the slots count the turns that took one in this SlotTime and the last
// one, still running). A turn whose slot was so taken back while its sink
// worked takes one again for what follows (renew), before the turns of
// its namespace that have not started.

// Shares hands out the delivery slots. Its methods are safe for concurrent
// use.
type Shares struct {
	slots   int           // <= 0: no bound, every turn runs at once
	quantum time.Duration // SlotTime
	now     func() time.Time
	// run runs a granted turn (Goroutines.Go); it must not block.
	run func(pull.Task)
	// wake calls f after d; nil: no timer (tests call tick).
	wake func(d time.Duration, f func())

	// reserve is how many slots only a namespace running fewer turns
	// may take.
	reserve int
	// perNamespace, when positive, is how many turns one namespace runs
	// at most while another is active (WithPerNamespace).
	perNamespace int

	mu sync.Mutex
	// epoch is the current SlotTime's number; cur and prev count the
	// running turns that took a slot in it and in the one before (turns
	// started earlier hold none).
	epoch     int64
	cur, prev int
	spaces    map[string]*Space
	// waiting are the spaces with turns queued, in the order they are
	// served in turn; next is where the next search for one starts.
	waiting []*Space
	next    int
	// armed is set while a wake is due.
	armed bool
	// last is the space granted a slot last, in epoch lastEpoch;
	// otherEpoch is the last epoch in which another space than last was.
	last                  *Space
	lastEpoch, otherEpoch int64
	turns                 sync.Pool
}

// Space is one namespace's part of the shares: its running turns (as
// Shares counts them) and its queue.
type Space struct {
	name      string
	workers   int // joined, not left
	epoch     int64
	cur, prev int
	// resumed are the turns that wait for a slot again after their sink
	// answered, served before queue[head:], those that wait for their
	// first, oldest first.
	resumed []*Turn
	queue   []*Turn
	head    int
	waiting bool
}

func (sp *Space) idle() bool { return len(sp.resumed) == 0 && sp.head == len(sp.queue) }

// Handler handles the event of a turn (Turn.Msg) when the turn runs.
type Handler interface {
	HandleTurn(*Turn)
}

// Turn is one event's turn: a Task that hands the event to its Handler
// and gives the slot back.
type Turn struct {
	s     *Shares
	sp    *Space
	epoch int64
	slot  bool // holds a slot
	h     Handler
	m     *pull.Msg
	// wake tells a turn that resumes that it may go on; made once, and
	// kept when the turn is used again.
	wake chan struct{}
}

// Run handles the event and gives its slot back.
func (t *Turn) Run() {
	t.h.HandleTurn(t)
	t.s.done(t)
}

// Msg is the turn's event.
func (t *Turn) Msg() *pull.Msg { return t.m }

// Pause gives t's slot back while it waits for its sink to be ready. A
// nil turn (an event handled outside the shares) has nothing to give.
func (t *Turn) Pause() {
	if t != nil && t.slot {
		t.s.release(t)
	}
}

// Resume waits for a slot for t again, before the turns of its namespace
// that have not started.
func (t *Turn) Resume() {
	if t != nil && t.s.slots > 0 {
		t.s.resume(t)
	}
}

// Renew takes a slot for t again, as Resume does, if the one it took was
// taken back while its sink worked.
func (t *Turn) Renew() {
	if t != nil && t.s.slots > 0 && t.s.expired(t) {
		t.s.resume(t)
	}
}

// New returns Shares of slots slots (<= 0: no bound) held for one to two
// quantum each, whose granted turns run calls (it must not block:
// Goroutines.Go).
func New(slots int, quantum time.Duration, run func(pull.Task), opts ...Option) *Shares {
	s := &Shares{
		slots: slots, quantum: quantum, reserve: slots / 4, now: time.Now, run: run,
		wake:      func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		spaces:    map[string]*Space{},
		lastEpoch: math.MinInt64 / 2, otherEpoch: math.MinInt64 / 2,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Option configures New.
type Option func(*Shares)

// WithPerNamespace holds each namespace to n turns at once (n > 0) while
// another namespace is active: has turns waiting, or was given a slot in
// the last ActiveSlotTimes SlotTimes. A namespace alone takes what the
// slots allow. The turns of a burst (a fan-out's deliveries, a reply
// storm's) so run a few at a time beside another namespace's, not all at
// once: what one namespace's deliveries cost the others is how many run
// at once (its requests, its sink's answers, the acknowledgements they
// set off), not only the slots they hold. Turns whose sink works past
// their SlotTimes give their slot back, so n bounds the deliveries to
// fast sinks (n over a delivery's time a second), not the slow ones.
func WithPerNamespace(n int) Option {
	return func(s *Shares) { s.perNamespace = n }
}

// ActiveSlotTimes is how many SlotTimes after its last slot a namespace
// counts as active for WithPerNamespace.
const ActiveSlotTimes = 4

// Join returns namespace's space, for a worker of it until Leave.
func (s *Shares) Join(namespace string) *Space {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spaces[namespace]
	if sp == nil {
		sp = &Space{name: namespace, epoch: s.epoch}
		s.spaces[namespace] = sp
	}
	sp.workers++
	return sp
}

// Leave says a worker of sp's namespace stopped; the space is forgotten
// with its namespace's last worker (turns still running count it off
// themselves).
func (s *Shares) Leave(sp *Space) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp.workers--; sp.workers == 0 && s.spaces[sp.name] == sp {
		delete(s.spaces, sp.name)
	}
}

// Submit runs m's turn for h, a worker that joined sp: at once while a
// slot is free, else when one is given to sp's namespace.
func (s *Shares) Submit(h Handler, sp *Space, m *pull.Msg) {
	t, _ := s.turns.Get().(*Turn)
	if t == nil {
		t = &Turn{s: s, wake: make(chan struct{}, 1)}
	}
	t.sp, t.h, t.m = sp, h, m
	if s.slots <= 0 {
		s.run(t)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free(t.sp) {
		s.grant(t)
		s.run(t)
		return
	}
	if sp.head > 0 && sp.head*2 >= len(sp.queue) { // keep the queue from growing at its head
		n := copy(sp.queue, sp.queue[sp.head:])
		clear(sp.queue[n:])
		sp.queue, sp.head = sp.queue[:n], 0
	}
	sp.queue = append(sp.queue, t)
	s.await(sp)
	s.armLocked()
}

// await puts sp, which has turns waiting, on the waiting list. The mu is
// held.
func (s *Shares) await(sp *Space) {
	if !sp.waiting {
		sp.waiting = true
		s.waiting = append(s.waiting, sp)
	}
}

// resume takes a slot for t, whose sink answered, waiting for one behind
// the turns of other namespaces that run fewer, and before those of its
// own that have not started.
func (s *Shares) resume(t *Turn) {
	s.mu.Lock()
	if s.free(t.sp) {
		s.grant(t)
		s.mu.Unlock()
		return
	}
	sp := t.sp
	sp.resumed = append(sp.resumed, t)
	s.await(sp)
	s.armLocked()
	s.mu.Unlock()
	<-t.wake // granted, or dropped without a slot
}

// free moves the epoch to now's, gives the slots it frees to waiting
// turns, and reports whether a slot is left that sp may take. The mu is
// held.
func (s *Shares) free(sp *Space) bool {
	s.advance(s.now())
	s.dispatchLocked()
	return s.mayTake(sp)
}

// mayTake reports whether sp may take a free slot: one that is not kept,
// or a kept one when it runs fewer than are kept. The mu is held.
func (s *Shares) mayTake(sp *Space) bool {
	free := s.slots - s.cur - s.prev
	running := sp.sync(s.epoch)
	if s.perNamespace > 0 && running >= s.perNamespace && s.othersActive(sp) {
		return false
	}
	return free > s.reserve || free > 0 && running < s.reserve
}

// othersActive reports whether another namespace than sp's has turns
// waiting or was given a slot in the last ActiveSlotTimes. The mu is held.
func (s *Shares) othersActive(sp *Space) bool {
	if n := len(s.waiting); n > 1 || n == 1 && !sp.waiting {
		return true
	}
	since := s.epoch - ActiveSlotTimes
	if s.last != sp {
		return s.last != nil && s.lastEpoch >= since
	}
	return s.otherEpoch >= since
}

// expired reports whether t's slot was taken back (it held it for its
// SlotTimes), and then that it holds none.
func (s *Shares) expired(t *Turn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.now())
	if t.slot && t.epoch < s.epoch-1 {
		t.slot = false
	}
	return !t.slot
}

// release gives t's slot back, and the slot to a waiting turn.
func (s *Shares) release(t *Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.now())
	t.sp.sync(s.epoch)
	switch t.epoch {
	case s.epoch:
		s.cur--
		t.sp.cur--
	case s.epoch - 1:
		s.prev--
		t.sp.prev--
	}
	t.slot = false
	s.dispatchLocked()
}

// done gives t's slot back, if it holds one, and keeps t for another
// event.
func (s *Shares) done(t *Turn) {
	if t.slot {
		s.release(t)
	}
	*t = Turn{s: s, wake: t.wake}
	s.turns.Put(t)
}

// tick frees the slots of turns that held one for their SlotTimes, and
// hands them to waiting turns: what a wake does.
func (s *Shares) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	s.advance(s.now())
	s.dispatchLocked()
	s.armLocked()
}

// Drop lets the turns of h, a worker of sp, that wait go on without a
// slot: a worker that stops lets them end (its events come again after
// their ack wait).
func (s *Shares) Drop(h Handler, sp *Space) {
	s.mu.Lock()
	var starts, resumes []*Turn
	sp.queue = slices.DeleteFunc(sp.queue, func(t *Turn) bool {
		if t != nil && t.h == h {
			starts = append(starts, t)
			return true
		}
		return false
	})
	sp.head = min(sp.head, len(sp.queue)) // the nils before head are no turn of h's
	sp.resumed = slices.DeleteFunc(sp.resumed, func(t *Turn) bool {
		if t.h == h {
			resumes = append(resumes, t)
			return true
		}
		return false
	})
	if sp.idle() {
		s.unwait(sp)
	}
	s.mu.Unlock()
	for _, t := range starts {
		s.run(t)
	}
	for _, t := range resumes {
		t.wake <- struct{}{}
	}
}

// advance moves the epoch to now's: turns that took their slot two or more
// SlotTimes ago hold it no more. The mu is held.
func (s *Shares) advance(now time.Time) {
	e := now.UnixNano() / int64(s.quantum)
	switch {
	case e == s.epoch:
	case e == s.epoch+1:
		s.prev, s.cur = s.cur, 0
	case e > s.epoch:
		s.prev, s.cur = 0, 0
	default:
		return // the clock went back: keep the epoch
	}
	s.epoch = e
}

// sync brings sp's counts to the shares' epoch. The mu is held.
func (sp *Space) sync(epoch int64) int {
	switch {
	case sp.epoch == epoch:
	case sp.epoch+1 == epoch:
		sp.prev, sp.cur = sp.cur, 0
	default:
		sp.prev, sp.cur = 0, 0
	}
	sp.epoch = epoch
	return sp.cur + sp.prev
}

// grant gives t a slot. The mu is held.
func (s *Shares) grant(t *Turn) {
	t.sp.sync(s.epoch)
	t.epoch, t.slot = s.epoch, true
	if t.sp != s.last {
		s.otherEpoch, s.last = s.lastEpoch, t.sp
	}
	s.lastEpoch = s.epoch
	s.cur++
	t.sp.cur++
}

// dispatchLocked gives the free slots to waiting turns: each to the
// oldest turn of the waiting namespace that runs the fewest, the first
// such from where the last search ended. The mu is held.
func (s *Shares) dispatchLocked() {
	for s.cur+s.prev < s.slots && len(s.waiting) > 0 {
		best, fewest := 0, int(^uint(0)>>1)
		for k := range s.waiting {
			i := (s.next + k) % len(s.waiting)
			if n := s.waiting[i].sync(s.epoch); n < fewest {
				best, fewest = i, n
			}
		}
		sp := s.waiting[best]
		if !s.mayTake(sp) {
			return // nor may the others, which run as many or more
		}
		s.next = best + 1
		if len(sp.resumed) > 0 {
			t := sp.resumed[0]
			sp.resumed = slices.Delete(sp.resumed, 0, 1)
			if sp.idle() {
				s.unwait(sp)
			}
			s.grant(t)
			t.wake <- struct{}{}
			continue
		}
		t := sp.queue[sp.head]
		sp.queue[sp.head] = nil
		sp.head++
		if sp.idle() {
			s.unwait(sp)
		}
		s.grant(t)
		s.run(t)
	}
}

// unwait takes sp, which has no turn waiting, off the waiting list. The
// mu is held.
func (s *Shares) unwait(sp *Space) {
	clear(sp.queue)
	sp.queue, sp.head = sp.queue[:0], 0
	if !sp.waiting {
		return
	}
	sp.waiting = false
	i := slices.Index(s.waiting, sp)
	s.waiting = slices.Delete(s.waiting, i, i+1)
	if s.next > i {
		s.next--
	}
	if len(s.waiting) > 0 {
		s.next %= len(s.waiting)
	} else {
		s.next = 0
	}
}

// armLocked has tick called at the next SlotTime while turns wait. The mu
// is held.
func (s *Shares) armLocked() {
	if s.armed || len(s.waiting) == 0 || s.wake == nil {
		return
	}
	s.armed = true
	now := s.now().UnixNano()
	q := int64(s.quantum)
	s.wake(time.Duration((now/q+1)*q-now), s.tick)
}
