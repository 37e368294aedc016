package dispatcher

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// heartbeat keeps the events a worker holds (waiting for its sink to be
// ready, or in delivery) its own: every interval it tells JetStream that
// each of them is still in progress, so that none is redelivered to
// another dispatcher while its delivery goes on. One timer per worker
// runs while the worker holds any event, instead of one timer per event:
// a timer, its function and its lock for every event were a tenth of a
// delivery's cost (issue 20's profiles). An event gets its first beat at
// most an interval after it was held, as it did with a timer of its own.
type heartbeat struct {
	mu     sync.Mutex
	events map[jetstream.Msg]struct{}
	timer  *time.Timer // nil until the first event is held
	every  time.Duration
}

// hold adds msg to the events beaten for every interval, and starts the
// beat if msg is the only one.
func (h *heartbeat) hold(msg jetstream.Msg, interval time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.events == nil {
		h.events = map[jetstream.Msg]struct{}{}
	}
	h.events[msg] = struct{}{}
	if len(h.events) > 1 {
		return
	}
	h.every = interval
	if h.timer == nil {
		h.timer = time.AfterFunc(interval, h.beat)
		return
	}
	h.timer.Reset(interval)
}

// release stops beating for msg, and stops the beat when no event is left.
func (h *heartbeat) release(msg jetstream.Msg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.events, msg)
	if len(h.events) == 0 && h.timer != nil {
		h.timer.Stop()
	}
}

// beat tells JetStream that every held event is in progress. An event
// released meanwhile may get one beat more, which JetStream ignores once
// the event is settled; a failed beat means the event is redelivered
// after its ack wait, and at least once still holds.
func (h *heartbeat) beat() {
	h.mu.Lock()
	beating := make([]jetstream.Msg, 0, len(h.events))
	for msg := range h.events {
		beating = append(beating, msg)
	}
	if len(beating) > 0 {
		h.timer.Reset(h.every)
	}
	h.mu.Unlock()
	for _, msg := range beating {
		_ = msg.InProgress()
	}
}
