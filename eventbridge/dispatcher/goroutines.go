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
	work chan task
	idle time.Duration
}

// task is work for goroutines. An event is a task, which saves making a
// function for each.
type task interface{ run() }

// taskFunc is a function as a task.
type taskFunc func()

func (f taskFunc) run() { f() }

// newGoroutines returns goroutines that wait idle for work before ending.
func newGoroutines(idle time.Duration) *goroutines {
	return &goroutines{work: make(chan task), idle: idle}
}

// goroutineIdle is how long a delivery goroutine waits for the next event
// before it ends: long enough to carry a steady flow of events from one to
// the next, short enough that a burst's goroutines are soon gone.
const goroutineIdle = 2 * time.Second

// run runs t on a waiting goroutine, or on a new one. It does not wait for
// t.
func (g *goroutines) run(t task) {
	select {
	case g.work <- t:
	default:
		go g.serve(t)
	}
}

// serve runs t, then the tasks it is handed, until none comes within idle.
func (g *goroutines) serve(t task) {
	idle := time.NewTimer(g.idle)
	defer idle.Stop()
	for {
		t.run()
		idle.Reset(g.idle)
		select {
		case t = <-g.work:
		case <-idle.C:
			return
		}
	}
}
