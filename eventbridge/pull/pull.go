package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// How a Puller speaks to JetStream.
//
// JetStream's pull protocol, as nats.go's Messages speaks it, with what
// kfn does not need left out: a pull request (a JSON {"batch", "expires"}
// published to $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>, replying to
// an inbox) waits on the server until it is filled or expires; the events
// come to the inbox's subscription, and the end of a request that was not
// filled comes as a status message (408 with the number of events it still
// wanted in Nats-Pending-Messages). A consumer is asked for at most its
// maxInFlightMessages at once, topped up when fewer than half of that are
// still asked for; JetStream's MaxAckPending, not the puller, bounds the
// events in flight across replicas.
//
// Why not one nats.go Messages iterator per Subscription: each costs a
// subscription, two goroutines, a heartbeat timer and a connection status
// listener of its own, and its requests expire and its heartbeats arrive
// in step with those of every other Subscription started at the same
// moment, so 1,000 Subscriptions made the server and the dispatcher wake
// up together every few seconds (issue 20). Here one subscription and one
// goroutine serve them all, requests carry no heartbeat (a request's
// expiry is its heartbeat: a request whose end was never told is asked
// again), and each expiry is drawn at random from the last quarter of
// Config.Expiry, so the renewals of idle Subscriptions spread out.

// Config configures a Puller. A zero Expiry means DefaultExpiry.
type Config struct {
	// Stream is the stream whose consumers are pulled.
	Stream string
	// Expiry is how long one pull request waits on the server; each is
	// drawn from its last quarter. A request whose end the server never
	// told is asked again about a quarter of it later.
	Expiry time.Duration
	// MaxHeldBytes bounds the bytes of the messages held at once, from
	// their arrival to their Release (and what Msg.Grow adds to them), for
	// all pulls together, and MaxHeldBytesPerPull for each; 0 or less
	// means no bound. A pull that holds nothing may still be sent one
	// message of any size. A quarter of MaxHeldBytes is kept for the
	// pulls of groups (Add) that hold less than a quarter: the pulls of a
	// group that holds more share the other three quarters, so that one
	// group's many pulls, slow to release, leave the next group room.
	MaxHeldBytes, MaxHeldBytesPerPull int64
}

// DefaultExpiry is the Expiry of a zero Config.
const DefaultExpiry = 30 * time.Second

// pullReq is the body of a JetStream pull request.
type pullReq struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires"`
	// MaxBytes, when not 0, bounds the bytes the request is answered
	// with: the server ends it before an event that does not fit.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

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

// Status codes of JetStream's answers to a pull request.
const (
	statusHeartbeat    = "100"
	statusNoMessages   = "404"
	statusTimeout      = "408"
	statusConflict     = "409"
	statusNoResponders = "503"
)

// ErrConsumerGone is what a pull's Lost tells when its consumer stopped
// answering: deleted, or not there at all.
var ErrConsumerGone = errors.New("the consumer is gone")

// ErrNoRoom is wrapped by Msg.Grow's error when the bytes asked for do not
// fit the byte bounds.
var ErrNoRoom = errors.New("no room left under the held bytes bounds")

// Puller asks consumers for messages and routes what they send to their
// pulls (Add). Its methods are safe for concurrent use. It is the handle
// of its work, shaped like jetstream.ConsumeContext: Stop ends it, and
// Closed tells when it ended.
type Puller struct {
	nc     *nats.Conn
	next   string // the pull request subject, without the consumer
	inbox  string // pull requests reply to inbox + id
	expiry time.Duration
	bounds heldBytes

	mu        sync.Mutex
	sub       *nats.Subscription
	connected bool
	// reconnects is the connection's count of reconnects when last read:
	// a change means the requests asked before are gone.
	reconnects uint64
	ids        uint64
	byID       map[uint64]*Pull // status messages name the request's inbox
	byName     map[string]*Pull // events name their consumer
	// held is the bytes of the events the workers hold; starved are the
	// pulls that asked for nothing for want of room under the bounds.
	held    int64
	starved map[*Pull]struct{}
	// heldBy is held by group, for the groups that hold any.
	heldBy map[string]int64

	stop   context.CancelFunc // set by Start
	closed chan struct{}
}

// Pull is one consumer's share of a Puller: its consumer, how many
// messages it asks for, and where they go. Its methods are safe for
// concurrent use. Fields after lost are guarded by the puller's mu.
type Pull struct {
	p        *Puller
	id       uint64
	group    string
	consumer string
	subject  string
	reply    string
	batch    int
	// h is handed each message (Handler).
	h Handler
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
}

// Start returns a Puller of the consumers of cfg.Stream on nc, listening
// for the answers of its pull requests on one subscription of nc, and
// renewing them on a goroutine of its own until Stop. It fails if it
// cannot subscribe (the connection is closed).
func Start(nc *nats.Conn, cfg Config) (*Puller, error) {
	if cfg.Expiry <= 0 {
		cfg.Expiry = DefaultExpiry
	}
	p := newPuller(nc, cfg.Stream, cfg.Expiry, heldBytes{total: cfg.MaxHeldBytes, perPull: cfg.MaxHeldBytesPerPull})
	if err := p.listen(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go func() {
		defer close(p.closed)
		p.run(ctx)
	}()
	return p, nil
}

// Stop ends the pulling: the subscription is dropped, and messages on
// their way come again after their ack wait. Messages handed over before
// stay held until released. It does not wait; Closed does. Safe to call
// more than once.
func (p *Puller) Stop() {
	if p.stop != nil {
		p.stop()
	}
}

// Closed returns a channel closed once the Puller stopped: after it, no
// message is handed to a pull. There is no Drain, as there is in
// jetstream.ConsumeContext: a Puller keeps no buffer of messages to
// drain, every message is handed over as it arrives.
func (p *Puller) Closed() <-chan struct{} { return p.closed }

// newPuller returns a puller of the consumers of stream on nc; listen
// and run start it (Start).
func newPuller(nc *nats.Conn, stream string, expiry time.Duration, bounds heldBytes) *Puller {
	return &Puller{
		closed:  make(chan struct{}),
		nc:      nc,
		next:    "$JS.API.CONSUMER.MSG.NEXT." + stream + ".",
		inbox:   nc.NewInbox() + ".",
		expiry:  expiry,
		bounds:  bounds,
		byID:    map[uint64]*Pull{},
		byName:  map[string]*Pull{},
		starved: map[*Pull]struct{}{},
		heldBy:  map[string]int64{},
	}
}

// listen subscribes to the answers of pull requests.
func (p *Puller) listen() error {
	sub, err := p.nc.Subscribe(p.inbox+"*", p.receive)
	if err != nil {
		return fmt.Errorf("subscribe to the answers of pull requests: %w", err)
	}
	// The events held here are bounded by the consumers' MaxAckPending;
	// a limit would drop events (redelivered only after the ack wait).
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribe to the answers of pull requests: %w", err)
	}
	p.mu.Lock()
	p.sub = sub
	p.connected, p.reconnects = p.nc.IsConnected(), p.nc.Stats().Reconnects
	p.mu.Unlock()
	return nil
}

// run renews requests whose end was never told and asks again after a
// reconnect, until ctx ends; then it unsubscribes.
func (p *Puller) run(ctx context.Context) {
	status := p.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING)
	defer p.nc.RemoveStatusListener(status)
	tick := time.NewTicker(min(p.expiry/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			_ = p.sub.Unsubscribe() // events on their way come again after the ack wait
			p.mu.Unlock()
			return
		case <-status:
			p.follow()
		case now := <-tick.C:
			p.renew(now)
		}
	}
}

// follow reads the connection's state: the requests made before a
// reconnect are gone with the connection, so after one every pull asks
// again. It reads the state rather than trusting the status events: nats.go
// drops an event its listener's buffer has no room for, and one that
// comes before the listener is registered is never told.
func (p *Puller) follow() {
	connected, reconnects := p.nc.IsConnected(), p.nc.Stats().Reconnects
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followLocked(connected, reconnects)
}

func (p *Puller) followLocked(connected bool, reconnects uint64) {
	again := connected && reconnects != p.reconnects
	p.connected = connected
	if !connected {
		return
	}
	p.reconnects = reconnects
	for _, pl := range p.byID {
		if again {
			pl.pending = 0
		}
		pl.topUp()
	}
}

// renew follows the connection's state, and asks again for the pulls
// whose last request should have ended well before now without its end
// being told (lost with a server, say), and for those that asked for
// nothing (a request that could not be sent).
func (p *Puller) renew(now time.Time) {
	grace := max(p.expiry/4, time.Second)
	connected, reconnects := p.nc.IsConnected(), p.nc.Stats().Reconnects
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followLocked(connected, reconnects)
	for _, pl := range p.byID {
		if pl.pending > 0 && now.After(pl.expires.Add(grace)) {
			pl.pending = 0
		}
		pl.topUp()
	}
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

// Add registers a pull of consumer, asking for up to batch messages at
// once when started, handed to h. Messages of the consumer that arrive go
// to the newest pull of it, also while it is paused. The pull's bytes
// count in its group's (the dispatcher's: the Subscription's namespace),
// which the kept quarter of Config.MaxHeldBytes is shared by.
func (p *Puller) Add(group, consumer string, batch int, h Handler) *Pull {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids++
	pl := &Pull{
		p: p, id: p.ids, group: group, consumer: consumer, batch: batch, h: h,
		subject: p.next + consumer, reply: p.inbox + strconv.FormatUint(p.ids, 10),
		lost: make(chan error, 1),
	}
	p.byID[pl.id] = pl
	p.byName[consumer] = pl
	return pl
}

// PullOf returns the pull consumer's messages go to, nil if none.
func (p *Puller) PullOf(consumer string) *Pull {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byName[consumer]
}

// Start makes the pull ask for messages, and forgets a loss told before.
func (pl *Pull) Start() {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	select {
	case <-pl.lost: // told before this start
	default:
	}
	pl.active = true
	pl.topUp()
}

// Pause makes the pull ask for nothing more. Messages already asked for
// still arrive, until their requests expire.
func (pl *Pull) Pause() {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	pl.active = false
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
	pl.active = false
	delete(p.byID, pl.id)
	delete(p.starved, pl)
	if p.byName[pl.consumer] == pl {
		delete(p.byName, pl.consumer)
	}
}

// topUp asks for more events when an active pull has fewer than half its
// batch asked for, within the room the byte bounds leave (heldBytes). The
// puller's mu is held.
func (pl *Pull) topUp() {
	if !pl.active || !pl.p.connected || pl.pending >= (pl.batch+1)/2 {
		return
	}
	n := pl.batch - pl.pending
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
	expiry := pl.p.expiry - time.Duration(rand.Int64N(int64(pl.p.expiry/4)+1))
	body, _ := json.Marshal(pullReq{Batch: n, Expires: expiry, MaxBytes: room}) // cannot fail
	if err := pl.p.nc.PublishRequest(pl.subject, pl.reply, body); err != nil {
		return // renew asks again
	}
	delete(pl.p.starved, pl)
	pl.needs = 0
	pl.pending += n
	pl.expires = time.Now().Add(expiry)
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
		return fmt.Errorf("%w: %d more bytes asked for, %d left (%d held by this consumer, %d in all; bounds %d and %d)",
			ErrNoRoom, n, max(room, 0), pl.held, p.held, p.bounds.perPull, p.bounds.total)
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

// fail ends the pull's asking and tells its worker why. The puller's mu is
// held.
func (pl *Pull) fail(err error) {
	pl.active = false
	pl.pending = 0
	select {
	case pl.lost <- err:
	default: // the worker has not read the last one yet
	}
}

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
	pl := p.byName[meta.Consumer]
	if pl == nil {
		return // no worker any more: it comes again after the ack wait
	}
	pl.pending = max(pl.pending-1, 0)
	pl.hold(e)
	if !pl.h.Take(e) {
		e.releaseLocked() // not taken: it comes again after the ack wait
	}
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
	pl.topUp()
}
