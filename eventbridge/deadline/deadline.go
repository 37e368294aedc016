package deadline

import (
	"context"
	"sync"
	"time"
)

// Windows gives requests their timeout. The requests that start within
// one window (a 64th of the timeout, at least a millisecond) share one
// context with a deadline, the window's, which ends the timeout after the
// window does: each request gets at least the timeout and at most a 64th
// more. It is safe for concurrent use.
type Windows struct {
	timeout time.Duration
	window  time.Duration
	// now is the clock (time.Now; tests set another).
	now func() time.Time

	mu      sync.Mutex
	current context.Context // the window's
	until   time.Time       // when the current window ends
	// live are the windows whose requests may still run, with when they
	// end, so that Stop can end them all.
	live []window
}

// window is one window's cancellation and deadline.
type window struct {
	cancel context.CancelFunc
	ends   time.Time
}

// New returns the Windows of requests that time out after timeout, which
// must be positive.
func New(timeout time.Duration) *Windows {
	return &Windows{timeout: timeout, window: max(timeout/64, time.Millisecond), now: time.Now}
}

// Context returns the context of a request starting now: done at the
// request's deadline, with the values of values but not its cancellation
// (a request outlives the work that started it, a delivery its removed
// Subscription, say).
func (w *Windows) Context(values context.Context) context.Context {
	now := w.now()
	w.mu.Lock()
	if !now.Before(w.until) {
		w.until = now.Add(w.window)
		ends := w.until.Add(w.timeout)
		var cancel context.CancelFunc
		w.current, cancel = context.WithDeadline(context.Background(), ends)
		// Windows past their deadline have ended by themselves.
		live := w.live[:0]
		for _, l := range w.live {
			if l.ends.After(now) {
				live = append(live, l)
			}
		}
		w.live = append(live, window{cancel: cancel, ends: ends})
	}
	current := w.current
	w.mu.Unlock()
	return requestContext{Context: current, values: values}
}

// Stop ends the requests of every window now (their contexts are done, as
// canceled) and releases the windows' timers; a request made later starts
// a new window. Call it once no request is in flight any more, or to end
// those that are.
func (w *Windows) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.live {
		l.cancel()
	}
	w.live = nil
	w.until = time.Time{}
}

// requestContext is a request's context: the deadline, Done and Err of its
// window, and the values of its request. The window, made from
// context.Background, holds one value only: the one by which the standard
// library finds the cancelable parent of a context derived from another.
// Value asks the window first, so that what it finds is the window, never
// the request's own cancelable context: a context derived from a
// requestContext (as net/http's transport derives one from every
// request's) is registered with the window, without a goroutine of its
// own, and the request's cancellation does not reach it
// (TestRequestContextDerivesWithoutGoroutines,
// TestRequestContextEndsAtItsDeadline).
type requestContext struct {
	context.Context // the window
	values          context.Context
}

// Value returns the window's value for key, else the request's.
func (c requestContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}
