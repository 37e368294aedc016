package delivery

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/pull"
)

// Retries are the events of a worker whose attempt failed and that wait
// for their next attempt held by the worker (in progress for JetStream,
// kept so by the heartbeat), not handed back to JetStream with a delay:
// JetStream counts an event handed back as unacknowledged until its delay
// ends and offers no way to take it back earlier, so the backlog budget
// could not give up the events of a failing sink while they waited. Held
// here, the oldest of them are the first the budget gives up (TakeOldest).
// A worker that stops hands its retries back to JetStream with the rest of
// their delay (Close). A dispatcher that dies leaves them to be
// redelivered after the ack wait; attempts are then counted from
// JetStream's delivery count again, so an event can get more attempts
// than maxDeliver, never fewer.
type Retries struct {
	mu     sync.Mutex
	closed bool
	byID   map[*pull.Msg]*retry
}

// retry is one event waiting for its next attempt.
type retry struct {
	e     *pull.Msg
	due   time.Time
	timer *time.Timer
}

// Add keeps e until delay has passed, then calls due with it, unless it
// was taken meanwhile. It reports false when the retries are closed.
func (rs *Retries) Add(e *pull.Msg, delay time.Duration, due func(*pull.Msg)) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return false
	}
	if rs.byID == nil {
		rs.byID = map[*pull.Msg]*retry{}
	}
	r := &retry{e: e, due: time.Now().Add(delay)}
	r.timer = time.AfterFunc(delay, func() {
		if rs.take(r) {
			due(e)
		}
	})
	rs.byID[e] = r
	return true
}

// take removes r if it is still there, and reports whether it was.
func (rs *Retries) take(r *retry) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byID[r.e] != r {
		return false
	}
	delete(rs.byID, r.e)
	return true
}

// TakeOldest removes up to n of the events waiting, those earliest in the
// stream first, and returns them; their timers will not fire.
func (rs *Retries) TakeOldest(n int) []*pull.Msg {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if n <= 0 || len(rs.byID) == 0 {
		return nil
	}
	all := make([]*retry, 0, len(rs.byID))
	for _, r := range rs.byID {
		all = append(all, r)
	}
	slices.SortFunc(all, func(a, b *retry) int { return cmp.Compare(streamSeq(a.e), streamSeq(b.e)) })
	var out []*pull.Msg
	for _, r := range all[:min(n, len(all))] {
		if r.timer.Stop() {
			delete(rs.byID, r.e)
			out = append(out, r.e)
		}
	}
	return out
}

// TakeOlder removes and returns the oldest event waiting if it is earlier
// in the stream than seq, else nil; its timer will not fire.
func (rs *Retries) TakeOlder(seq uint64) *pull.Msg {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var oldest *retry
	for _, r := range rs.byID {
		if streamSeq(r.e) < seq && (oldest == nil || streamSeq(r.e) < streamSeq(oldest.e)) {
			oldest = r
		}
	}
	if oldest == nil || !oldest.timer.Stop() {
		return nil
	}
	delete(rs.byID, oldest.e)
	return oldest.e
}

// Len returns the number of events waiting.
func (rs *Retries) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.byID)
}

// Close stops taking events and returns every one waiting, each with the
// time left until it was due (0 for one that came due meanwhile); their
// due is never called.
func (rs *Retries) Close() map[*pull.Msg]time.Duration {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.closeLocked()
}

// closeLocked is Close with the mu held. A timer that fired and waits
// for the mu finds its retry gone (take) and calls nothing: the retry is
// returned here, whatever its timer's Stop says, or nobody would hand it
// back (its worker's heartbeat would keep it in progress for ever).
func (rs *Retries) closeLocked() map[*pull.Msg]time.Duration {
	rs.closed = true
	out := make(map[*pull.Msg]time.Duration, len(rs.byID))
	now := time.Now()
	for e, r := range rs.byID {
		r.timer.Stop()
		out[e] = max(r.due.Sub(now), 0)
	}
	rs.byID = nil
	return out
}

// streamSeq is the event's sequence in the stream. The puller hands over only
// events whose metadata it read.
func streamSeq(e *pull.Msg) uint64 {
	meta, err := e.Metadata()
	if err != nil {
		return 0
	}
	return meta.Sequence.Stream
}
