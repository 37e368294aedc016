package dispatcher

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
	"github.com/nats-io/nats.go/jetstream"
)

// This file is how events reach the workers: one puller per Dispatcher
// asks every Subscription's consumer for events, all of them answering on
// one subscription of the NATS connection, and hands each event to the
// worker of its consumer.
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
// Config.PullExpiry, so the renewals of idle Subscriptions spread out.

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

// errConsumerGone is what a pull reports when its consumer stopped
// answering: deleted, or not there at all.
var errConsumerGone = errors.New("the consumer is gone")

// puller asks consumers for events and routes what they send to the pulls
// of their workers. Its methods are safe for concurrent use.
type puller struct {
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
	byID       map[uint64]*pull // status messages name the request's inbox
	byName     map[string]*pull // events name their consumer
	// held is the bytes of the events the workers hold; starved are the
	// pulls that asked for nothing for want of room under the bounds.
	held    int64
	starved map[*pull]struct{}
}

// pull is one worker's share of the puller: its consumer, how many events
// it asks for, and where they go. Fields after mu are guarded by the
// puller's mu.
type pull struct {
	p        *puller
	id       uint64
	consumer string
	subject  string
	reply    string
	batch    int
	// deliver is called with each event, under the puller's lock: it
	// must only hand the event over, and report whether it did.
	deliver func(*event) bool
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

// newPuller returns a puller of the consumers of stream on nc; listen
// starts it.
func newPuller(nc *nats.Conn, stream string, expiry time.Duration, bounds heldBytes) *puller {
	return &puller{
		nc:      nc,
		next:    "$JS.API.CONSUMER.MSG.NEXT." + stream + ".",
		inbox:   nc.NewInbox() + ".",
		expiry:  expiry,
		bounds:  bounds,
		byID:    map[uint64]*pull{},
		byName:  map[string]*pull{},
		starved: map[*pull]struct{}{},
	}
}

// listen subscribes to the answers of pull requests.
func (p *puller) listen() error {
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
func (p *puller) run(ctx context.Context) {
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
func (p *puller) follow() {
	connected, reconnects := p.nc.IsConnected(), p.nc.Stats().Reconnects
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followLocked(connected, reconnects)
}

func (p *puller) followLocked(connected bool, reconnects uint64) {
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
func (p *puller) renew(now time.Time) {
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

// add registers a pull of consumer, asking for up to batch events at once
// when started, delivered to deliver. Events of the consumer that arrive
// go to the newest pull of it, also while it is paused.
func (p *puller) add(consumer string, batch int, deliver func(*event) bool) *pull {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids++
	pl := &pull{
		p: p, id: p.ids, consumer: consumer, batch: batch, deliver: deliver,
		subject: p.next + consumer, reply: p.inbox + strconv.FormatUint(p.ids, 10),
		lost: make(chan error, 1),
	}
	p.byID[pl.id] = pl
	p.byName[consumer] = pl
	return pl
}

// start makes the pull ask for events.
func (pl *pull) start() {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	select {
	case <-pl.lost: // told before this start
	default:
	}
	pl.active = true
	pl.topUp()
}

// pause makes the pull ask for nothing more. Events already asked for
// still arrive, until their requests expire.
func (pl *pull) pause() {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	pl.active = false
}

// remove unregisters the pull: once it returns, deliver is not called
// again. Events of the consumer that arrive later, with no other pull of
// it, are left unacknowledged and come again after the ack wait.
func (pl *pull) remove() {
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
func (pl *pull) topUp() {
	if !pl.active || !pl.p.connected || pl.pending >= (pl.batch+1)/2 {
		return
	}
	n := pl.batch - pl.pending
	room, bounded := pl.room()
	switch {
	case !bounded:
	case room >= max(pl.needs, 1):
	case pl.held == 0:
		n, room = 1, 0 // one event, however large
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
func (pl *pull) room() (int64, bool) {
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
	}
	return room, true
}

// hold counts an event's bytes as held by its pull until release. The
// puller's mu is held.
func (pl *pull) hold(e *event) {
	e.pl, e.size = pl, msgSize(e.msg)
	pl.held += e.size
	pl.p.held += e.size
}

// release says the worker no longer holds e (settled, or handed back):
// its bytes leave the bounds, and pulls that wanted room ask again. Safe
// to call more than once.
func (e *event) release() {
	pl := e.pl
	if pl == nil {
		return
	}
	p := pl.p
	p.mu.Lock()
	defer p.mu.Unlock()
	e.releaseLocked()
}

// releaseLocked is release with the puller's mu held.
func (e *event) releaseLocked() {
	pl := e.pl
	if pl == nil {
		return
	}
	p := pl.p
	e.pl = nil
	pl.held -= e.size
	p.held -= e.size
	if p.bounds.total <= 0 && p.bounds.perPull <= 0 {
		return
	}
	pl.topUp()
	for other := range p.starved {
		other.topUp()
	}
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
func (pl *pull) fail(err error) {
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
func (p *puller) receive(m *nats.Msg) {
	if m.Reply == "" { // events carry the subject to acknowledge them on
		if status := m.Header.Get("Status"); status != "" {
			p.status(m, status)
		}
		return
	}
	e := &event{msg: m}
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
	if !pl.deliver(e) {
		e.releaseLocked() // not taken: it comes again after the ack wait
	}
	pl.topUp()
}

// requestID returns the id of the pull whose request's inbox subject is.
func (p *puller) requestID(subject string) (uint64, bool) {
	rest, ok := strings.CutPrefix(subject, p.inbox)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil
}

// status handles the status message of a pull request.
func (p *puller) status(m *nats.Msg, status string) {
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
			pl.fail(errConsumerGone)
		case strings.Contains(desc, "leadership change"), strings.Contains(desc, "server shutdown"):
			// Ask the new leader, or after the reconnect.
			pl.pending = 0
			pl.topUp()
		default: // a request the consumer refused (max waiting, batch, expiry)
			pl.fail(fmt.Errorf("pull request refused: %s", m.Header.Get("Description")))
		}
	case statusNoResponders:
		pl.fail(errConsumerGone)
	default:
		pl.fail(fmt.Errorf("pull request answered %s %s", status, m.Header.Get("Description")))
	}
}

// ended takes an ended request's events that will not come off the
// pull's count, and asks again. The puller's mu is held.
func (pl *pull) ended(m *nats.Msg) {
	left, _ := strconv.Atoi(m.Header.Get("Nats-Pending-Messages"))
	pl.pending = max(pl.pending-left, 0)
	pl.topUp()
}

// event is an event the puller received, as a jetstream.Msg: nats.go's
// jetstream package makes its messages only for its own subscriptions, so
// the settling goes through the nats.Msg's own JetStream methods, which
// send the same acknowledgements on the same subjects. Its metadata is
// read from the acknowledgement subject at the first call of Metadata
// (the puller's, which routes the event by its consumer), which is not
// safe for concurrent use.
type event struct {
	msg  *nats.Msg
	meta jetstream.MsgMetadata
	read bool  // meta is read
	err  error // why it could not be
	// w is the worker that delivers the event, as a task of the
	// dispatcher's goroutines.
	w *worker
	// pl is the pull whose held bytes count the event, size its bytes;
	// pl is nil once released. Both are guarded by the puller's mu.
	pl   *pull
	size int64
}

var _ jetstream.Msg = (*event)(nil)

// Metadata returns the event's JetStream metadata.
func (e *event) Metadata() (*jetstream.MsgMetadata, error) {
	if !e.read {
		e.read = true
		meta, err := e.msg.Metadata()
		if err != nil {
			e.err = err
		} else {
			e.meta = jetstream.MsgMetadata{
				Sequence:     jetstream.SequencePair{Consumer: meta.Sequence.Consumer, Stream: meta.Sequence.Stream},
				NumDelivered: meta.NumDelivered, NumPending: meta.NumPending, Timestamp: meta.Timestamp,
				Stream: meta.Stream, Consumer: meta.Consumer, Domain: meta.Domain,
			}
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	return &e.meta, nil
}

func (e *event) Data() []byte         { return e.msg.Data }
func (e *event) Headers() nats.Header { return e.msg.Header }
func (e *event) Subject() string      { return e.msg.Subject }
func (e *event) Reply() string        { return e.msg.Reply }
func (e *event) Ack() error           { return e.msg.Ack() }
func (e *event) Nak() error           { return e.msg.Nak() }
func (e *event) InProgress() error    { return e.msg.InProgress() }
func (e *event) Term() error          { return e.msg.Term() }

func (e *event) DoubleAck(ctx context.Context) error { return e.msg.AckSync(nats.Context(ctx)) }

func (e *event) NakWithDelay(delay time.Duration) error { return e.msg.NakWithDelay(delay) }

func (e *event) TermWithReason(reason string) error {
	if err := e.msg.Respond([]byte("+TERM " + reason)); err != nil {
		return fmt.Errorf("terminate event: %w", err)
	}
	return nil
}
