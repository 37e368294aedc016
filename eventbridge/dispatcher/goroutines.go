package dispatcher

import "time"

// goroutines runs functions on goroutines it keeps between them: a
// function goes to a goroutine that waits for one, or to a new goroutine
// when none waits; a goroutine that finished a function waits up to idle
// for the next before it ends.
//
// A delivery runs deep (net/http's transport, context propagation), so a
// fresh goroutine's stack grew, and was copied, once for nearly every
// event: that was the largest single cost of a delivery after HTTP itself
// (issue 20's profiles). A kept goroutine keeps its grown stack. How many
// run at once is bounded by the callers (the events in flight), not here.
type goroutines struct {
	work chan func()
	idle time.Duration
}

// newGoroutines returns goroutines that wait idle for work before ending.
func newGoroutines(idle time.Duration) *goroutines {
	return &goroutines{work: make(chan func()), idle: idle}
}

// goroutineIdle is how long a delivery goroutine waits for the next event
// before it ends: long enough to carry a steady flow of events from one to
// the next, short enough that a burst's goroutines are soon gone.
const goroutineIdle = 2 * time.Second

// run runs f on a waiting goroutine, or on a new one. It does not wait for
// f.
func (g *goroutines) run(f func()) {
	select {
	case g.work <- f:
	default:
		go g.serve(f)
	}
}

// serve runs f, then the functions it is handed, until none comes within
// idle.
func (g *goroutines) serve(f func()) {
	idle := time.NewTimer(g.idle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(g.idle)
		select {
		case f = <-g.work:
		case <-idle.C:
			return
		}
	}
}
