package keyorder

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
)

// Order holds the events of one ordered Subscription by key. Its methods
// are safe for concurrent use. Events without a key (the empty key) are
// each a key of their own: they wait for nothing but room.
type Order[T any] struct {
	mu sync.Mutex
	// most is how many events may be started at once; started counts
	// them (an event is started from the Add or Done that returned it to
	// its Done).
	most, started int
	// open says events may start (Open, Close).
	open bool
	// version changes with every event added or done and every close: an
	// Open decided on a count of held events is refused if it changed
	// meanwhile.
	version uint64
	lanes   map[string]*lane[T]
	held    map[uint64]struct{} // sequences of the events held: queued or started
	// ready are the lanes whose first event may start, in the order they
	// became ready, waiting for room or for the Order to open; a lane is
	// in it at most once.
	ready []*lane[T]
}

// lane is the events of one key: queued ones by sequence, and whether
// one is started.
type lane[T any] struct {
	key     string
	started bool
	ready   bool // in Order.ready
	queue   []entry[T]
}

type entry[T any] struct {
	seq uint64
	v   T
}

// New returns a closed Order that starts at most most events at once
// (at least 1).
func New[T any](most int) *Order[T] {
	return &Order[T]{most: max(most, 1), lanes: map[string]*lane[T]{}, held: map[uint64]struct{}{}}
}

// laneKey is the lane of an event's key: an event without one is a lane
// of its own.
func laneKey(key string, seq uint64) string {
	if key == "" {
		return "\x00" + strconv.FormatUint(seq, 10)
	}
	return key
}

// Add holds v, the event of stream sequence seq and key key, and returns
// the events that start now (v, when its key has nothing before it, the
// Order is open and there is room). An event whose sequence is held
// already (a copy redelivered while the first is held) is not added:
// duplicate is true, and the holder lets the copy go.
func (o *Order[T]) Add(key string, seq uint64, v T) (start []T, duplicate bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.held[seq]; ok {
		return nil, true
	}
	o.held[seq] = struct{}{}
	o.version++
	k := laneKey(key, seq)
	l := o.lanes[k]
	if l == nil {
		l = &lane[T]{key: k}
		o.lanes[k] = l
	}
	// Insert by sequence: within a session events come in the stream's
	// order, so this is an append but for events that came again.
	i, _ := slices.BinarySearchFunc(l.queue, seq, func(e entry[T], s uint64) int { return cmp.Compare(e.seq, s) })
	l.queue = slices.Insert(l.queue, i, entry[T]{seq: seq, v: v})
	o.markReady(l)
	return o.fill(), false
}

// Done settles the started event seq of key (delivered, given up or
// handed back), and returns the events that start now: the next of its
// key, or of others that waited for room.
func (o *Order[T]) Done(key string, seq uint64) []T {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.held, seq)
	o.version++
	k := laneKey(key, seq)
	if l := o.lanes[k]; l != nil && l.started {
		l.started = false
		o.started--
		if len(l.queue) == 0 {
			delete(o.lanes, k)
		} else {
			o.markReady(l)
		}
	}
	return o.fill()
}

// markReady queues l, which has an event queued, for a start when none
// of it is started. The mu is held.
func (o *Order[T]) markReady(l *lane[T]) {
	if !l.started && !l.ready {
		l.ready = true
		o.ready = append(o.ready, l)
	}
}

// fill starts the first events of ready lanes while there is room and
// the Order is open. The mu is held.
func (o *Order[T]) fill() []T {
	var start []T
	for o.open && o.started < o.most && len(o.ready) > 0 {
		l := o.ready[0]
		o.ready[0] = nil
		o.ready = o.ready[1:]
		l.ready = false
		e := l.queue[0]
		l.queue[0] = entry[T]{}
		l.queue = l.queue[1:]
		l.started = true
		o.started++
		start = append(start, e.v)
	}
	if len(o.ready) == 0 {
		o.ready = nil // let the array go
	}
	return start
}

// State is what Open checks against the consumer: how many events the
// Order held, at which version.
type State struct {
	Held    int
	version uint64
}

// Snapshot returns the Order's state, to open it with once the consumer
// said how many events it has handed out and not had settled (Open).
func (o *Order[T]) Snapshot() State {
	o.mu.Lock()
	defer o.mu.Unlock()
	return State{Held: len(o.held), version: o.version}
}

// Open opens the Order, when the consumer's count of events handed out
// and not settled (its ack pending, asked after s was taken) is at most
// the events held in s, and nothing was added, done or closed since s:
// then every event the consumer handed out is one of the Order's (an
// event elsewhere, in transit, or whose settlement the consumer has not
// processed yet counts in the consumer's and not in the Order's). It
// reports whether it opened, and the events that start now.
func (o *Order[T]) Open(s State, ackPending int) (bool, []T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.version != o.version || ackPending > s.Held {
		return false, nil
	}
	o.open = true
	return true, o.fill()
}

// IsOpen reports whether the Order is open.
func (o *Order[T]) IsOpen() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.open
}

// Close closes the Order: no event starts until it is opened again. The
// events started go on.
func (o *Order[T]) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open = false
	o.version++
}

// Held returns how many events the Order holds: queued and started.
func (o *Order[T]) Held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.held)
}

// Drain closes the Order and returns the events queued, not started, by
// sequence, which it holds no more: for a holder that stops to hand back.
func (o *Order[T]) Drain() []T {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open = false
	o.version++
	var queued []entry[T]
	for k, l := range o.lanes {
		queued = append(queued, l.queue...)
		l.queue, l.ready = nil, false
		if !l.started {
			delete(o.lanes, k)
		}
	}
	o.ready = nil
	slices.SortFunc(queued, func(a, b entry[T]) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]T, len(queued))
	for i, e := range queued {
		delete(o.held, e.seq)
		out[i] = e.v
	}
	return out
}
