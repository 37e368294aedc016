package deadline

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type valueKey struct{}

// A request's context ends at least the timeout and at most a 64th more
// after it was made, whatever becomes of the attempt's context, whose
// values it carries.
func TestRequestContextEndsAtItsDeadline(t *testing.T) {
	const timeout = 640 * time.Millisecond
	d := New(timeout)
	defer d.Stop()
	attempt, cancelAttempt := context.WithCancel(context.WithValue(context.Background(), valueKey{}, "span"))
	before := time.Now()
	ctx := d.Context(attempt)
	after := time.Now()

	deadline, ok := ctx.Deadline()
	require.True(t, ok)
	assert.False(t, deadline.Before(before.Add(timeout)), "at least the timeout")
	assert.False(t, deadline.After(after.Add(timeout+timeout/64)), "at most a 64th more")
	assert.Equal(t, "span", ctx.Value(valueKey{}))

	derived, cancelDerived := context.WithCancel(ctx) // as the transport's
	defer cancelDerived()
	cancelAttempt() // a removed Subscription: the delivery goes on
	select {
	case <-ctx.Done():
		t.Fatal("the request ended with its attempt's context")
	case <-derived.Done():
		t.Fatal("a context derived from the request ended with its attempt's context")
	case <-time.After(timeout / 4):
	}
	assert.NoError(t, ctx.Err())
	assert.NoError(t, derived.Err())

	select {
	case <-ctx.Done():
	case <-time.After(5 * timeout):
		t.Fatal("the request did not end at its deadline")
	}
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	<-derived.Done()
	assert.ErrorIs(t, derived.Err(), context.DeadlineExceeded)
	assert.False(t, time.Now().Before(deadline))
}

// Requests made within one window share its deadline; one made after it
// gets a later one.
func TestRequestsOfAWindowShareItsDeadline(t *testing.T) {
	d := New(time.Hour) // windows of about a minute
	defer d.Stop()
	first, _ := d.Context(context.Background()).Deadline()
	second, _ := d.Context(context.Background()).Deadline()
	assert.Equal(t, first, second)

	d.mu.Lock()
	d.until = time.Now() // the window is over
	d.mu.Unlock()
	third, _ := d.Context(context.Background()).Deadline()
	assert.True(t, third.After(first))
}

// Every request of a window gets at least the whole timeout, the one that
// starts as the window is about to end as much as its first: the window's
// deadline is the timeout after the window ends, not after it begins. The
// clock is set by the test, so that the requests start where it says in
// their window, whatever the machine's load.
func TestRequestsLateInAWindowGetTheWholeTimeout(t *testing.T) {
	const timeout = 640 * time.Millisecond // windows of 10 ms
	d := New(timeout)
	defer d.Stop()
	start := time.Now()
	for _, at := range []time.Duration{0, d.window / 2, d.window - time.Nanosecond, d.window, 2*d.window - time.Nanosecond} {
		now := start.Add(at)
		d.now = func() time.Time { return now }
		deadline, ok := d.Context(context.Background()).Deadline()
		require.True(t, ok)
		window := at / d.window
		assert.Equal(t, start.Add((window+1)*d.window+timeout), deadline, "a request %s into the run (window %d)", at, window)
		assert.False(t, deadline.Before(now.Add(timeout)), "a request %s after its window began got %s, less than the timeout", at%d.window, deadline.Sub(now))
		assert.False(t, deadline.After(now.Add(timeout+d.window)), "at most a window more than the timeout")
	}
}

// The transport derives a context from each request's. Derived from a
// request context, it is registered with the window, as a child of a
// standard context is: were it not, each would start a goroutine that
// waits for its parent, one per delivery.
func TestRequestContextDerivesWithoutGoroutines(t *testing.T) {
	d := New(time.Minute)
	defer d.Stop()
	attempt, cancelAttempt := context.WithCancel(context.Background())
	defer cancelAttempt()
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 100 {
		_, cancel := context.WithCancelCause(d.Context(attempt))
		cancels = append(cancels, func() { cancel(nil) })
	}
	assert.Less(t, runtime.NumGoroutine()-before, 10, "a goroutine per derived context")
	for _, c := range cancels {
		c()
	}
}

// Stopping ends the requests of every window, not only the current
// one's, and releases their timers; a request made later gets a window of
// its own.
func TestStoppedDeadlinesStartAnew(t *testing.T) {
	d := New(time.Minute)
	d.window = time.Millisecond // requests a millisecond apart: two windows
	earlier := d.Context(context.Background())
	time.Sleep(2 * time.Millisecond) // time has to pass for a window to end
	ctx := d.Context(context.Background())
	require.NotEqual(t, earlier.(requestContext).Context, ctx.(requestContext).Context, "two windows")
	d.Stop()
	<-ctx.Done()
	<-earlier.Done() // it would end a minute later without Stop
	later := d.Context(context.Background())
	assert.NoError(t, later.Err())
	d.Stop()
}
