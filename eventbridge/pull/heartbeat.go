package pull

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Heartbeat keeps the messages its holder holds (waiting for a sink to be
// ready, or in delivery) its own: every interval it tells JetStream that
// each of them is still in progress, so that none is redelivered to
// another consumer while its delivery goes on. One timer per Heartbeat
// runs while any message is held, instead of one timer per message: a
// timer, its function and its lock for every message were a tenth of a
// delivery's cost (issue 20's profiles). A message gets its first beat at
// most an interval after it was held, or after the end of a beat under way
// when it was held; one beat runs at a time. The zero value is ready to
// use; its methods are safe for concurrent use.
type Heartbeat struct {
	mu      sync.Mutex
	events  map[jetstream.Msg]struct{}
	timer   *time.Timer // nil until the first message is held
	every   time.Duration
	beating bool // a beat is under way: its end arms the timer
}

// Hold adds msg to the messages beaten for every interval, and starts the
// beat if msg is the only one.
func (h *Heartbeat) Hold(msg jetstream.Msg, interval time.Duration) {
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
	switch {
	case h.timer == nil:
		h.timer = time.AfterFunc(interval, h.beat)
	case !h.beating:
		h.timer.Reset(interval)
	}
}

// Release stops beating for msg, and stops the beat when no message is
// left. A message released while a beat is under way may get that beat.
func (h *Heartbeat) Release(msg jetstream.Msg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.events, msg)
	if len(h.events) == 0 && h.timer != nil {
		h.timer.Stop()
	}
}

// Forget stops beating for every message held and returns how many there
// were: a holder that stopped and still held some (which it should not)
// lets JetStream redeliver them after their ack wait, rather than keep
// them in progress for ever. Hold starts the beat again.
func (h *Heartbeat) Forget() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.events)
	clear(h.events)
	if h.timer != nil {
		h.timer.Stop()
	}
	return n
}

// beat tells JetStream that every held message is in progress. One
// released meanwhile may get one beat more, which JetStream ignores once
// the message is settled; a failed beat means the message is redelivered
// after its ack wait, and at least once still holds. The next beat is
// timed from the end of this one: a beat slower than the interval (its
// goroutine not run for a while, a slow connection) delays the next
// rather than running beside it.
func (h *Heartbeat) beat() {
	h.mu.Lock()
	h.beating = true
	beating := make([]jetstream.Msg, 0, len(h.events))
	for msg := range h.events {
		beating = append(beating, msg)
	}
	h.mu.Unlock()
	for _, msg := range beating {
		_ = msg.InProgress()
	}
	h.mu.Lock()
	h.beating = false
	if len(h.events) > 0 {
		h.timer.Reset(h.every)
	}
	h.mu.Unlock()
}
