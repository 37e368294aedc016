package pull

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"time"
)

// pullReq is the body of a JetStream pull request.
type pullReq struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires"`
	// MaxBytes, when not 0, bounds the bytes the request is answered
	// with: the server ends it before an event that does not fit.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Group is the consumer's priority group, for a pinned pull (AddPinned);
	// ID the pin the server gave this puller, once it gave one.
	Group string `json:"group,omitempty"`
	ID    string `json:"id,omitempty"`
}

// Pull is one consumer's share of a Puller: its consumer, how many
// messages it asks for, and where they go. Its methods are safe for
// concurrent use. Fields after lost are guarded by the puller's mu.
type Pull struct {
	p     *Puller
	id    uint64
	group string
	// of is the pull's consumer and its stream.
	of      consumerOf
	subject string
	reply   string
	batch   int
	// h is handed each message (Handler).
	h Handler
	// priority is the consumer's priority group when the pull asks as a
	// pinned client (AddPinned); empty otherwise.
	priority string
	// lost says that the consumer went away or refused a request; the
	// pull then asks for nothing until started again.
	lost chan error

	active  bool      // asking for events
	pending int       // events asked for and neither received nor expired
	expires time.Time // when the last request asked ends (its 408 is due)
	held    int64     // bytes of the events of this pull that its worker holds
	// needs, when not 0, is more than the room left in the last request
	// when the next event did not fit it: the pull asks again once it has
	// that much room, or for that event alone once it holds nothing.
	needs int64
	// turn is where the pull stands in its group's turns, since when it
	// streams (turns.go); lastHanded when it was last handed an event.
	turn       turnState
	since      time.Time
	lastHanded time.Time
}

// Handler is what a pull hands its messages to.
type Handler interface {
	// Take is called with each message as it arrives, under the Puller's
	// lock: it must only hand the message over (never call the Puller,
	// the Pull or Release), and report whether it took it; one not taken
	// is released and comes again after its ack wait.
	Take(*Msg) bool
	// Handle handles a message taken: it is what the message's Run calls,
	// so that a Msg is a Task for Goroutines with no allocation of its
	// own.
	Handle(*Msg)
}

// Disconnected is what the Handler of a pinned pull (AddPinned) may also be:
// it is told, under the Puller's lock as Take is, when the connection is
// lost (at the latest a second after), for it no longer holds its
// messages alone: they go to another client after their ack wait, and
// the pin after its time to live.
type Disconnected interface {
	Disconnected()
}

// Add registers a pull of consumer, asking for up to batch messages at
// once when started, handed to h. Messages of the consumer that arrive go
// to the newest pull of it, also while it is paused. The pull's bytes
// count in its group's (the dispatcher's: the Subscription's namespace),
// which the kept quarter of Config.MaxHeldBytes is shared by.
func (p *Puller) Add(group, consumer string, batch int, h Handler) *Pull {
	return p.AddPinned(group, consumer, "", batch, h)
}

// consumerOf is a consumer and its stream: a Subscription's consumer has
// one name in every partition of the event stream.
type consumerOf struct{ stream, consumer string }

// AddPinned is Add of a pull that asks as a client of the consumer's
// priority group priority (a consumer of JetStream's pinned client
// policy; none when empty): JetStream hands the consumer's events to one
// client at a time, the one it pinned, and the pull's requests carry the
// pin the server gave (the Puller's for the consumer, which every pull of
// it shares). A client not pinned waits: the server holds its requests
// until the pin is free. Each message tells the pin and the connection it
// came in (Msg.Session), and h is told when the connection is lost if it
// is a Disconnected.
func (p *Puller) AddPinned(group, consumer, priority string, batch int, h Handler) *Pull {
	return p.AddIn(p.stream, group, consumer, priority, batch, h)
}

// AddIn is AddPinned of a consumer of the named stream instead of
// Config.Stream's: the Puller pulls the consumers of any stream, each
// pull's messages named by their stream and consumer.
func (p *Puller) AddIn(stream, group, consumer, priority string, batch int, h Handler) *Pull {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids++
	of := consumerOf{stream, consumer}
	pl := &Pull{
		p: p, id: p.ids, group: group, of: of, batch: batch, h: h, priority: priority,
		subject: nextSubject + stream + "." + consumer, reply: p.inbox + strconv.FormatUint(p.ids, 10),
		lost: make(chan error, 1),
	}
	p.byID[pl.id] = pl
	p.byName[of] = pl
	return pl
}

// nextSubject starts the subject of a pull request:
// nextSubject<stream>.<consumer>.
const nextSubject = "$JS.API.CONSUMER.MSG.NEXT."

// PullOf returns the pull Config.Stream's consumer's messages go to, nil
// if none.
func (p *Puller) PullOf(consumer string) *Pull {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byName[consumerOf{p.stream, consumer}]
}

// Start makes the pull ask for messages, and forgets a loss told before.
func (pl *Pull) Start() {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	select {
	case <-pl.lost: // told before this start
	default:
	}
	now := time.Now()
	pl.activate(true, now)
	pl.enter(now)
	pl.topUp()
}

// Pause makes the pull ask for nothing more. Messages already asked for
// still arrive, until their requests expire.
func (pl *Pull) Pause() {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	pl.leave(time.Now())
}

// Lost is told why the pull stopped asking on its own: ErrConsumerGone
// when its consumer went away, or a request the consumer refused. The
// pull then asks for nothing until started again.
func (pl *Pull) Lost() <-chan error { return pl.lost }

// Remove unregisters the pull: once it returns, deliver is not called
// again. Messages of the consumer that arrive later, with no other pull
// of it, are left unacknowledged and come again after the ack wait.
func (pl *Pull) Remove() {
	p := pl.p
	p.mu.Lock()
	defer p.mu.Unlock()
	pl.leave(time.Now())
	delete(p.byID, pl.id)
	delete(p.starved, pl)
	if p.byName[pl.of] == pl {
		delete(p.byName, pl.of)
		delete(p.pins, pl.of)
	}
}

// topUp asks for more events when an active pull has fewer than half its
// batch asked for, within the room the byte bounds leave (heldBytes). The
// puller's mu is held.
func (pl *Pull) topUp() {
	batch := pl.batchNow()
	if !pl.active || !pl.p.connected || batch == 0 || pl.pending >= (batch+1)/2 {
		return
	}
	n := batch - pl.pending
	room, bounded := pl.room()
	switch {
	case !bounded:
	case room >= max(pl.needs, 1):
	case pl.p.heldBy[pl.group] == 0:
		n, room = 1, 0 // one event, however large, for a group that holds none
	default:
		pl.p.starved[pl] = struct{}{} // asked again when bytes are released
		return
	}
	// The last quarter of the expiry, at random: requests made at the
	// same moment end at different ones.
	now := time.Now()
	expiry := pl.requestExpiry(pl.p.expiry-time.Duration(rand.Int64N(int64(pl.p.expiry/4)+1)), now)
	req := pullReq{Batch: n, Expires: expiry, MaxBytes: room}
	if pl.priority != "" {
		req.Group, req.ID = pl.priority, pl.p.pins[pl.of]
	}
	body, _ := json.Marshal(req) // cannot fail
	if err := pl.p.nc.PublishRequest(pl.subject, pl.reply, body); err != nil {
		return // renew asks again
	}
	delete(pl.p.starved, pl)
	pl.needs = 0
	pl.pending += n
	pl.expires = now.Add(expiry)
}

// fail ends the pull's asking and tells its worker why. The puller's mu is
// held.
func (pl *Pull) fail(err error) {
	pl.leave(time.Now())
	pl.pending = 0
	select {
	case pl.lost <- err:
	default: // the worker has not read the last one yet
	}
}
