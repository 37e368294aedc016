package seats

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrFlowFull and ErrAllFull are wrapped, with the context's error, by
// the error of an Enter whose context ended before it had a seat: the
// first when its flow held all its seats then, the second when every seat
// of the Gate's bound in all was held.
var (
	ErrFlowFull = errors.New("the flow holds all its seats")
	ErrAllFull  = errors.New("every seat is held")
)

// Gate hands each flow at most its seats, and all flows together at most
// the Gate's total (see the package's doc). Its methods are safe for
// concurrent use; make one with New.
type Gate struct {
	perFlow, total int

	mu sync.Mutex
	// flows are the flows that hold seats or wait for one; waiting those
	// of them with work waiting.
	flows   map[string]*flow
	waiting map[*flow]struct{}
	// held and queued are the seats held and the works waiting, of every
	// flow.
	held, queued int
	// tickets numbers the works that wait, in the order they came.
	tickets uint64
}

type flow struct {
	key   string
	held  int
	queue []*waiter
}

type waiter struct {
	ready  chan struct{}
	ticket uint64
	// granted says the seat was handed over (guarded by the Gate's mu):
	// a waiter that gives up after it was gives the seat back.
	granted bool
}

// An Option sets a Gate up in New.
type Option func(*Gate)

// WithTotal bounds the seats all flows hold together to total; 0 or less
// bounds nothing.
func WithTotal(total int) Option {
	return func(g *Gate) { g.total = max(total, 0) }
}

// New returns a Gate of perFlow seats per flow; perFlow <= 0 bounds a
// flow only by the Gate's total, if any.
func New(perFlow int, opts ...Option) *Gate {
	g := &Gate{perFlow: max(perFlow, 0), flows: map[string]*flow{}, waiting: map[*flow]struct{}{}}
	for _, o := range opts {
		o(g)
	}
	if g.total > 0 && (g.perFlow == 0 || g.perFlow > g.total) {
		g.perFlow = g.total
	}
	return g
}

// PerFlow is the bound of each flow's seats; 0 bounds nothing.
func (g *Gate) PerFlow() int { return g.perFlow }

// Total is the bound of all flows' seats together; 0 bounds nothing.
func (g *Gate) Total() int { return g.total }

// bounded says whether the Gate bounds anything: one that does not
// counts nothing.
func (g *Gate) bounded() bool { return g.perFlow > 0 }

// room says whether f may take a seat past its waiting works. The mu is
// held.
func (g *Gate) room(f *flow) bool {
	return f.held < g.perFlow && (g.total == 0 || g.held < g.total)
}

// Enter takes one of flow key's seats, waiting, behind the flow's works
// that came before, until one frees or ctx is done: then it takes none
// and returns an error that wraps ctx's and ErrFlowFull or ErrAllFull.
// Call Leave(key) once for each Enter that returned nil, once the work is
// done. A Gate without a bound never waits.
func (g *Gate) Enter(ctx context.Context, key string) error {
	if !g.bounded() {
		return nil
	}
	g.mu.Lock()
	f, took := g.takeFree(key)
	if took {
		g.mu.Unlock()
		return nil
	}
	g.tickets++
	w := &waiter{ready: make(chan struct{}), ticket: g.tickets}
	f.queue = append(f.queue, w)
	g.waiting[f] = struct{}{}
	g.queued++
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted {
		// Handed a seat as ctx ended: it goes to the next.
		g.leave(f)
		return g.why(f, ctx.Err())
	}
	for i, q := range f.queue {
		if q == w {
			f.queue = append(f.queue[:i], f.queue[i+1:]...)
			g.queued--
			break
		}
	}
	if len(f.queue) == 0 {
		delete(g.waiting, f)
	}
	g.forget(f)
	return g.why(f, ctx.Err())
}

// TryEnter takes one of flow key's seats if one is free now and none of
// the flow's works waits for one, without waiting; it reports whether it
// took one (then call Leave(key) once the work is done). A Gate without a
// bound always lets it in.
func (g *Gate) TryEnter(key string) bool {
	if !g.bounded() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f, took := g.takeFree(key)
	if !took {
		g.forget(f)
	}
	return took
}

// takeFree takes a seat of flow key (kept from now on) if one is free and
// none of its works waits, and reports whether it did. The mu is held.
func (g *Gate) takeFree(key string) (*flow, bool) {
	f, ok := g.flows[key]
	if !ok {
		f = &flow{key: key}
		g.flows[key] = f
	}
	if len(f.queue) == 0 && g.room(f) {
		g.take(f)
		return f, true
	}
	return f, false
}

// why wraps err, a wait's context's, with the bound that held it. The mu
// is held.
func (g *Gate) why(f *flow, err error) error {
	if f.held >= g.perFlow {
		return fmt.Errorf("%w: %w", ErrFlowFull, err)
	}
	return fmt.Errorf("%w: %w", ErrAllFull, err)
}

// Leave gives back a seat flow key holds: it goes to the first of the
// waiting works of the flow that holds the fewest seats among those with
// room (of flows that hold as many, the one whose first work has waited
// longest), or back to the Gate.
func (g *Gate) Leave(key string) {
	if !g.bounded() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.flows[key]; ok && f.held > 0 {
		g.leave(f)
	}
}

// leave gives back a seat of f and hands the room it makes on. The mu is
// held.
func (g *Gate) leave(f *flow) {
	f.held--
	g.held--
	if g.total == 0 {
		// Only f has room now: any other flow with works waiting holds
		// all its seats.
		if len(f.queue) > 0 {
			g.grant(f)
		}
		g.forget(f)
		return
	}
	for {
		next := g.fewest()
		if next == nil {
			break
		}
		g.grant(next)
	}
	g.forget(f)
}

// fewest is the flow with works waiting and room that holds the fewest
// seats (of those that hold as many, the one whose first work came
// first), or nil. The mu is held.
func (g *Gate) fewest() *flow {
	if g.held >= g.total {
		return nil
	}
	var best *flow
	for f := range g.waiting {
		if f.held >= g.perFlow {
			continue
		}
		if best == nil || f.held < best.held || f.held == best.held && f.queue[0].ticket < best.queue[0].ticket {
			best = f
		}
	}
	return best
}

// grant hands the seat to f's first waiting work. The mu is held.
func (g *Gate) grant(f *flow) {
	w := f.queue[0]
	f.queue[0] = nil
	f.queue = f.queue[1:]
	if len(f.queue) == 0 {
		delete(g.waiting, f)
	}
	g.queued--
	g.take(f)
	w.granted = true
	close(w.ready)
}

func (g *Gate) take(f *flow) {
	f.held++
	g.held++
}

// Held returns how many seats flow key holds and how many of its works
// wait for one.
func (g *Gate) Held(key string) (held, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.flows[key]; ok {
		return f.held, len(f.queue)
	}
	return 0, 0
}

// Totals returns the seats held and the works waiting for one, of every
// flow.
func (g *Gate) Totals() (held, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.queued
}

// Flows returns how many flows hold or wait for a seat: the Gate keeps
// nothing of the others.
func (g *Gate) Flows() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.flows)
}

// forget drops f once it holds and waits for nothing. The mu is held.
func (g *Gate) forget(f *flow) {
	if f.held == 0 && len(f.queue) == 0 {
		delete(g.flows, f.key)
	}
}
