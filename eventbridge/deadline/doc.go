// Package deadline gives requests their timeout through contexts shared by
// the requests that start together (Windows), instead of a context, a
// timer and a channel per request.
//
// Why: a request's timeout context is cheap alone, but the event bridge
// makes one per event, twice (storing it, delivering it), and net/http's
// transport derives a context of its own from every request's, which it
// registers with a cancelable parent in a map the parent makes for its
// first child. Per event that was a timer, a channel and that map, the
// largest cost of a delivery beside HTTP itself and its goroutine (issue
// 20's profiles). A window's context is made once per window and takes
// the registrations of all its requests.
package deadline
