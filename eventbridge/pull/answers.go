package pull

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Status codes of JetStream's answers to a pull request.
const (
	statusHeartbeat    = "100"
	statusNoMessages   = "404"
	statusTimeout      = "408"
	statusConflict     = "409"
	statusNoResponders = "503"
	// statusWrongPin ends a request that carried a pin the server no
	// longer gives (another client was pinned), or that it took back.
	statusWrongPin = "423"
)

// pinHeader carries the pin of a pinned consumer's client on each of its
// messages.
const pinHeader = "Nats-Pin-Id"

// receive handles one message on the inbox: an event, or the status of a
// pull request. An event names its consumer in its metadata (it comes
// with its own subject, not the inbox of the request that asked for it),
// and goes to the newest pull of that consumer.
func (p *Puller) receive(m *nats.Msg) {
	if m.Reply == "" { // events carry the subject to acknowledge them on
		if status := m.Header.Get("Status"); status != "" {
			p.status(m, status)
		}
		return
	}
	e := &Msg{msg: m}
	meta, err := e.Metadata()
	if err != nil {
		return // not an event of a consumer: nothing to settle
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.byName[consumerOf{meta.Stream, meta.Consumer}]
	if pl == nil {
		return // no worker any more: it comes again after the ack wait
	}
	pl.pending = max(pl.pending-1, 0)
	if pl.priority != "" {
		// The pin this message came with, and the connection: a message
		// lost with a connection, or handed out before another client
		// was pinned, comes again later, in another session.
		pin := m.Header.Get(pinHeader)
		if pin != "" {
			p.pins[pl.of] = pin
		}
		e.session = Session{Pin: pin, Reconnects: p.nc.Stats().Reconnects}
	}
	pl.hold(e)
	if !pl.h.Take(e) {
		e.releaseLocked() // not taken: it comes again after the ack wait
	}
	pl.handed(time.Now())
	pl.topUp()
}

// requestID returns the id of the pull whose request's inbox subject is.
func (p *Puller) requestID(subject string) (uint64, bool) {
	rest, ok := strings.CutPrefix(subject, p.inbox)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil
}

// status handles the status message of a pull request.
func (p *Puller) status(m *nats.Msg, status string) {
	id, ok := p.requestID(m.Subject)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.byID[id]
	if pl == nil {
		return
	}
	switch status {
	case statusHeartbeat: // none asked for; a flow control message needs no answer from a pull
	case statusNoMessages, statusTimeout:
		// The request ended; what it still wanted will not come.
		pl.ended(m)
	case statusConflict:
		desc := strings.ToLower(m.Header.Get("Description"))
		switch {
		case strings.Contains(desc, "exceeds maxbytes"):
			// The next event did not fit the room left in the request.
			left, _ := strconv.ParseInt(m.Header.Get("Nats-Pending-Bytes"), 10, 64)
			pl.needs = left + 1
			pl.ended(m)
		case strings.Contains(desc, "batch completed"):
			pl.ended(m) // the request's bytes were used up
		case strings.Contains(desc, "consumer deleted"):
			pl.fail(ErrConsumerGone)
		case strings.Contains(desc, "leadership change"), strings.Contains(desc, "server shutdown"):
			// Ask the new leader, or after the reconnect.
			pl.pending = 0
			pl.topUp()
		default: // a request the consumer refused (max waiting, batch, expiry)
			pl.fail(fmt.Errorf("pull request refused: %s", m.Header.Get("Description")))
		}
	case statusWrongPin:
		// Another client holds the pin, or the server took ours back: ask
		// again without it, which the server holds until the pin is free.
		// The refusal of a request as it came says nothing of its size:
		// ask for a whole batch again.
		delete(p.pins, pl.of)
		pl.pending = 0
		pl.topUp()
	case statusNoResponders:
		pl.fail(ErrConsumerGone)
	default:
		pl.fail(fmt.Errorf("pull request answered %s %s", status, m.Header.Get("Description")))
	}
}

// ended takes an ended request's events that will not come off the
// pull's count, and asks again. The puller's mu is held.
func (pl *Pull) ended(m *nats.Msg) {
	left, _ := strconv.Atoi(m.Header.Get("Nats-Pending-Messages"))
	pl.pending = max(pl.pending-left, 0)
	pl.yieldIfOver(time.Now())
	pl.topUp()
}
