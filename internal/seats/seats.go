package seats

import (
	"context"
	"sync"
)

// Gate hands each flow at most PerFlow seats (see the package's doc). Its
// methods are safe for concurrent use; make one with New.
type Gate struct {
	perFlow int

	mu sync.Mutex
	// flows are the flows that hold seats or wait for one.
	flows map[string]*flow
	// held and queued are the seats held and the works waiting, of every
	// flow.
	held, queued int
}

type flow struct {
	key   string
	held  int
	queue []*waiter
}

type waiter struct {
	ready chan struct{}
	// granted says the seat was handed over (guarded by the Gate's mu):
	// a waiter that gives up after it was gives the seat back.
	granted bool
}

// New returns a Gate of perFlow seats per flow; perFlow <= 0 bounds
// nothing.
func New(perFlow int) *Gate {
	return &Gate{perFlow: perFlow, flows: map[string]*flow{}}
}

// PerFlow is the bound of each flow's seats; 0 or less bounds nothing.
func (g *Gate) PerFlow() int { return g.perFlow }

// Enter takes one of flow key's seats, waiting, behind the flow's works
// that came before, while it holds them all, until ctx is done (its error
// then, no seat taken). Call leave once the work is done, to give the seat
// back; calls after the first do nothing. A Gate without a bound never
// waits.
func (g *Gate) Enter(ctx context.Context, key string) (leave func(), err error) {
	if g.perFlow <= 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	f, ok := g.flows[key]
	if !ok {
		f = &flow{key: key}
		g.flows[key] = f
	}
	if f.held < g.perFlow && len(f.queue) == 0 {
		f.held++
		g.held++
		g.mu.Unlock()
		return g.leaver(f), nil
	}
	w := &waiter{ready: make(chan struct{})}
	f.queue = append(f.queue, w)
	g.queued++
	g.mu.Unlock()
	select {
	case <-w.ready:
		return g.leaver(f), nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		// Handed a seat as ctx ended: it goes to the next.
		g.mu.Unlock()
		g.leaver(f)()
		return nil, ctx.Err()
	}
	for i, q := range f.queue {
		if q == w {
			f.queue = append(f.queue[:i], f.queue[i+1:]...)
			g.queued--
			break
		}
	}
	g.forget(f)
	g.mu.Unlock()
	return nil, ctx.Err()
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

// leaver returns the leave of a seat f holds: once, it hands the seat to
// the first of f's waiters, or gives it back.
func (g *Gate) leaver(f *flow) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(f.queue) > 0 {
				w := f.queue[0]
				f.queue[0] = nil
				f.queue = f.queue[1:]
				g.queued--
				w.granted = true
				close(w.ready)
				return
			}
			f.held--
			g.held--
			g.forget(f)
		})
	}
}
