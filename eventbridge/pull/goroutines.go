package pull

import "time"

// Goroutines runs tasks on goroutines it keeps between them: a task goes
// to a goroutine that waits for one, or to a new goroutine when none
// waits; a goroutine that finished a task waits up to its idle time for
// the next before it ends.
//
// A delivery runs deep (net/http's transport, context propagation), so a
// fresh goroutine's stack grew, and was copied, once for nearly every
// message: that was the largest single cost of a delivery after HTTP
// itself (issue 20's profiles). A kept goroutine keeps its grown stack.
// How many run at once is bounded by the callers (the messages they
// hold), not here.
type Goroutines struct {
	work chan Task
	idle time.Duration
}

// Task is work for Goroutines. A caller's own type can be a Task, which
// saves making a function for each.
type Task interface{ Run() }

// TaskFunc is a function as a Task.
type TaskFunc func()

// Run calls f.
func (f TaskFunc) Run() { f() }

// DefaultIdle is how long a kept goroutine waits for the next task before
// it ends: long enough to carry a steady flow of messages from one to the
// next, short enough that a burst's goroutines are soon gone.
const DefaultIdle = 2 * time.Second

// NewGoroutines returns Goroutines whose goroutines wait idle for work
// before ending; 0 means DefaultIdle.
func NewGoroutines(idle time.Duration) *Goroutines {
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Goroutines{work: make(chan Task), idle: idle}
}

// Go runs t on a waiting goroutine, or on a new one. It does not wait for
// t.
func (g *Goroutines) Go(t Task) {
	select {
	case g.work <- t:
	default:
		go g.serve(t)
	}
}

// serve runs t, then the tasks it is handed, until none comes within idle.
func (g *Goroutines) serve(t Task) {
	idle := time.NewTimer(g.idle)
	defer idle.Stop()
	for {
		t.Run()
		idle.Reset(g.idle)
		select {
		case t = <-g.work:
		case <-idle.C:
			return
		}
	}
}
