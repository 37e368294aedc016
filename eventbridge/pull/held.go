package pull

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// ErrNoRoom is wrapped by Msg.Grow's error when the bytes asked for do not
// fit the byte bounds.
var ErrNoRoom = errors.New("no room left under the held bytes bounds")

// heldBytes bounds the bytes of the events a puller's workers hold (from
// their arrival to their settling, retries included): at most total for
// all of them and perPull for each Subscription, so that neither a burst
// of large events nor one Subscription can take the dispatcher's memory.
// A pull that holds nothing may ask for one event of any size (JetStream
// bounds it by the stream's largest), so that no event is too large ever
// to be delivered; the bounds can then be passed by one event each.
type heldBytes struct {
	total, perPull int64 // 0: no bound
}

// room returns how many bytes of events the pull may still be sent, and
// whether any bound is set. The puller's mu is held.
func (pl *Pull) room() (int64, bool) {
	b := pl.p.bounds
	if b.total <= 0 && b.perPull <= 0 {
		return 0, false
	}
	room := int64(1<<63 - 1)
	if b.perPull > 0 {
		room = b.perPull - pl.held
	}
	if b.total > 0 {
		room = min(room, b.total-pl.p.held)
		// The kept quarter: a group holding it or more shares the rest,
		// one holding less may take what it lacks of it.
		kept, group := b.total/4, pl.p.heldBy[pl.group]
		shared := max(b.total-kept-pl.p.held, 0)
		if group < kept {
			shared += kept - group
		}
		room = min(room, shared)
	}
	return room, true
}

// count counts n more bytes held by pl (fewer when negative), in all and
// in its group's. The puller's mu is held.
func (pl *Pull) count(n int64) {
	pl.held += n
	pl.p.held += n
	if g := pl.p.heldBy[pl.group] + n; g != 0 {
		pl.p.heldBy[pl.group] = g
	} else {
		delete(pl.p.heldBy, pl.group)
	}
}

// hold counts an event's bytes as held by its pull until release. The
// puller's mu is held.
func (pl *Pull) hold(e *Msg) {
	e.pl, e.size, e.h = pl, msgSize(e.msg), pl.h
	pl.count(e.size)
}

// Release says the message is no longer held (settled, or handed back):
// its bytes leave the bounds, and pulls that wanted room ask again. Safe
// to call more than once, and on a message no Puller holds (NewMsg).
func (e *Msg) Release() {
	pl := e.pl
	if pl == nil {
		return
	}
	p := pl.p
	p.mu.Lock()
	defer p.mu.Unlock()
	e.releaseLocked()
}

// Grow counts n more bytes as held with the message, until Shrink or its
// Release: bytes its holder keeps in memory on its account (a sink's reply
// read for it), which then count against the byte bounds as the message's
// own do. When they do not fit the room its pull and the puller have left
// (Config), Grow counts nothing and returns an error wrapping ErrNoRoom,
// unless the message is all its pull holds: as a pull that holds nothing
// may be sent one message of any size, a message alone may keep what its
// handling needs. A message no Puller holds (NewMsg, or released) grows
// without bounds, and counts nothing.
func (e *Msg) Grow(n int64) error {
	return e.GrowOrGiveBack(n, 0)
}

// GrowOrGiveBack is Grow, but when the n bytes do not fit it also counts
// off grown bytes that Grow counted before (what it read of the same
// reply), in the same step: a holder that gives up what it was growing
// for leaves its room to the others at once, and none of them finds its
// bytes still counted between its failure and its Shrink.
func (e *Msg) GrowOrGiveBack(n, grown int64) error {
	pl := e.pl
	if pl == nil || n <= 0 {
		return nil
	}
	p := pl.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.pl == nil {
		return nil
	}
	if room, bounded := pl.room(); bounded && n > room && pl.held != e.size {
		err := fmt.Errorf("%w: %d more bytes asked for, %d left (%d held by this consumer, %d in all; bounds %d and %d)",
			ErrNoRoom, n, max(room, 0), pl.held, p.held, p.bounds.perPull, p.bounds.total)
		if grown > 0 {
			e.size -= grown
			pl.count(-grown)
			p.topUpStarved(pl)
		}
		return err
	}
	e.size += n
	pl.count(n)
	return nil
}

// Shrink counts n fewer bytes held with the message, of those Grow
// counted; the pulls that wanted room ask again. It does nothing for a
// released message (Release counted off what it held).
func (e *Msg) Shrink(n int64) {
	pl := e.pl
	if pl == nil || n <= 0 {
		return
	}
	p := pl.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.pl == nil {
		return
	}
	e.size -= n
	pl.count(-n)
	p.topUpStarved(pl)
}

// releaseLocked is release with the puller's mu held.
func (e *Msg) releaseLocked() {
	pl := e.pl
	if pl == nil {
		return
	}
	p := pl.p
	e.pl = nil
	pl.count(-e.size)
	p.topUpStarved(pl)
}

// topUpStarved asks again for pl, which released bytes, and for the pulls
// that wanted room, when the bytes are bounded. The puller's mu is held.
func (p *Puller) topUpStarved(pl *Pull) {
	if p.bounds.total <= 0 && p.bounds.perPull <= 0 {
		return
	}
	pl.topUp()
	for other := range p.starved {
		other.topUp()
	}
}

// Starved reports whether the pull wants events and the byte bounds leave
// it no room for the next: its worker holds as many bytes as it may,
// however many events that is. Safe for concurrent use.
func (pl *Pull) Starved() bool {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	_, ok := pl.p.starved[pl]
	return ok
}

// msgSize is about the bytes an event takes in memory: its data and
// headers.
func msgSize(m *nats.Msg) int64 {
	n := len(m.Data) + len(m.Subject) + len(m.Reply)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}
