package dispatcher

import (
	"slices"
	"sync"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// Delivery slots: how the dispatcher's work is shared among namespaces.
//
// Every event a worker takes, first attempt or retry, is a turn: its
// attempt and all that settles it (acknowledging, retrying, dead-lettering,
// storing the sink's reply). At most Config.DeliverySlots turns run at
// once. While slots are free a turn runs at once, so a namespace alone may
// use them all; when none is, turns wait in a queue of their namespace,
// and each slot that frees goes to the waiting namespace that runs the
// fewest turns (in turn among equals), oldest turn first. So under
// contention every namespace with work runs an equal share of the slots,
// whatever its fan-out, retries or event sizes: a namespace whose 300
// Subscriptions take one event each waits behind its own events, not in
// front of another's.
//
// A sink that never answers must not keep slots from the others, and an
// attempt waiting for its sink costs no CPU, so a turn holds its slot for
// one to two SlotTimes at most (the slots count the turns started in this
// SlotTime and the last one, still running): after that it runs on
// without one. Waiting is then bounded by about SlotTime, and a
// namespace's held events by its Subscriptions' maxInFlightMessages and
// the held bytes bounds, as before.

// shares hands out the delivery slots. Its methods are safe for concurrent
// use.
type shares struct {
	slots   int           // <= 0: no bound, every turn runs at once
	quantum time.Duration // SlotTime
	now     func() time.Time
	// run runs a granted turn (Goroutines.Go); it must not block.
	run func(pull.Task)
	// wake calls f after d; nil: no timer (tests call tick).
	wake func(d time.Duration, f func())

	mu sync.Mutex
	// epoch is the current SlotTime's number; cur and prev count the
	// running turns that took a slot in it and in the one before (turns
	// started earlier hold none).
	epoch     int64
	cur, prev int
	spaces    map[string]*space
	// waiting are the spaces with turns queued, in the order they are
	// served in turn; next is where the next search for one starts.
	waiting []*space
	next    int
	// armed is set while a wake is due.
	armed bool
	turns sync.Pool
}

// space is one namespace's part of the shares: its running turns (as
// shares counts them) and its queue.
type space struct {
	name      string
	workers   int // joined, not left
	epoch     int64
	cur, prev int
	queue     []*turn // queue[head:] wait, oldest first
	head      int
	waiting   bool
}

// turn is one event's turn: a Task that hands the event to its worker and
// gives the slot back.
type turn struct {
	s     *shares
	sp    *space
	epoch int64
	slot  bool // holds a slot (not run by drop)
	w     *worker
	m     *pull.Msg
}

// Run handles the event and gives its slot back.
func (t *turn) Run() {
	t.w.Handle(t.m)
	t.s.done(t)
}

func newShares(slots int, quantum time.Duration, run func(pull.Task)) *shares {
	return &shares{
		slots: slots, quantum: quantum, now: time.Now, run: run,
		wake:   func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		spaces: map[string]*space{},
	}
}

// join returns namespace's space, for a worker of it until leave.
func (s *shares) join(namespace string) *space {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spaces[namespace]
	if sp == nil {
		sp = &space{name: namespace, epoch: s.epoch}
		s.spaces[namespace] = sp
	}
	sp.workers++
	return sp
}

// leave says a worker of sp's namespace stopped; the space is forgotten
// with its namespace's last worker (turns still running count it off
// themselves).
func (s *shares) leave(sp *space) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp.workers--; sp.workers == 0 && s.spaces[sp.name] == sp {
		delete(s.spaces, sp.name)
	}
}

// submit runs m's turn for w: at once while a slot is free, else when one
// is given to w's namespace.
func (s *shares) submit(w *worker, m *pull.Msg) {
	t, _ := s.turns.Get().(*turn)
	if t == nil {
		t = &turn{s: s}
	}
	t.sp, t.w, t.m = w.space, w, m
	if s.slots <= 0 {
		t.slot = false
		s.run(t)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.now())
	if s.cur+s.prev < s.slots {
		s.grant(t)
		return
	}
	sp := t.sp
	if sp.head > 0 && sp.head*2 >= len(sp.queue) { // keep the queue from growing at its head
		n := copy(sp.queue, sp.queue[sp.head:])
		clear(sp.queue[n:])
		sp.queue, sp.head = sp.queue[:n], 0
	}
	sp.queue = append(sp.queue, t)
	if !sp.waiting {
		sp.waiting = true
		s.waiting = append(s.waiting, sp)
	}
	s.armLocked()
}

// done gives t's slot back, and the slot to a waiting turn.
func (s *shares) done(t *turn) {
	if t.slot {
		s.mu.Lock()
		s.advance(s.now())
		switch t.epoch {
		case s.epoch:
			s.cur--
			t.sp.cur--
		case s.epoch - 1:
			s.prev--
			t.sp.prev--
		}
		s.dispatchLocked()
		s.mu.Unlock()
	}
	*t = turn{s: s}
	s.turns.Put(t)
}

// tick frees the slots of turns that held one for their SlotTimes, and
// hands them to waiting turns: what a wake does.
func (s *shares) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	s.advance(s.now())
	s.dispatchLocked()
	s.armLocked()
}

// drop runs, without a slot, the turns of w that wait: a worker that stops
// lets them end (its events come again after their ack wait).
func (s *shares) drop(w *worker) {
	s.mu.Lock()
	sp := w.space
	var mine []*turn
	kept := sp.queue[:sp.head]
	for _, t := range sp.queue[sp.head:] {
		if t.w == w {
			mine = append(mine, t)
		} else {
			kept = append(kept, t)
		}
	}
	clear(sp.queue[len(kept):])
	sp.queue = kept
	if sp.head == len(sp.queue) {
		s.unwait(sp)
	}
	s.mu.Unlock()
	for _, t := range mine {
		t.slot = false
		s.run(t)
	}
}

// advance moves the epoch to now's: turns that took their slot two or more
// SlotTimes ago hold it no more. The mu is held.
func (s *shares) advance(now time.Time) {
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
func (sp *space) sync(epoch int64) int {
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

// grant gives t a slot and runs it. The mu is held.
func (s *shares) grant(t *turn) {
	t.sp.sync(s.epoch)
	t.epoch, t.slot = s.epoch, true
	s.cur++
	t.sp.cur++
	s.run(t)
}

// dispatchLocked gives the free slots to waiting turns: each to the
// oldest turn of the waiting namespace that runs the fewest, the first
// such from where the last search ended. The mu is held.
func (s *shares) dispatchLocked() {
	for s.cur+s.prev < s.slots && len(s.waiting) > 0 {
		best, fewest := 0, int(^uint(0)>>1)
		for k := range s.waiting {
			i := (s.next + k) % len(s.waiting)
			if n := s.waiting[i].sync(s.epoch); n < fewest {
				best, fewest = i, n
			}
		}
		sp := s.waiting[best]
		t := sp.queue[sp.head]
		sp.queue[sp.head] = nil
		sp.head++
		s.next = best + 1
		if sp.head == len(sp.queue) {
			s.unwait(sp)
		}
		s.grant(t)
	}
}

// unwait takes sp, whose queue is empty, off the waiting list. The mu is
// held.
func (s *shares) unwait(sp *space) {
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
func (s *shares) armLocked() {
	if s.armed || len(s.waiting) == 0 || s.wake == nil {
		return
	}
	s.armed = true
	now := s.now().UnixNano()
	q := int64(s.quantum)
	s.wake(time.Duration((now/q+1)*q-now), s.tick)
}
