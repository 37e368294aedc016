package pull

import (
	"context"
	"errors"
	"fmt"
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
	// Stream is the stream of the consumers Add and AddPinned pull (AddIn
	// pulls those of any stream).
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
	// MaxStreamingPerGroup bounds the pulls of one group (Add) that ask
	// for their whole batch at once; the group's other active pulls ask
	// for one event, and wait for a turn once it came (turns.go). A pull
	// streams for Turn at most while others of its group wait (its
	// requests then end with its turn), and as long as it likes while
	// none do. 0 or less means no bound; a zero Turn means DefaultTurn.
	MaxStreamingPerGroup int
	Turn                 time.Duration
}

// DefaultTurn is the Turn of a Config that sets none.
const DefaultTurn = 250 * time.Millisecond

// DefaultExpiry is the Expiry of a zero Config.
const DefaultExpiry = 30 * time.Second

// ErrConsumerGone is what a pull's Lost tells when its consumer stopped
// answering: deleted, or not there at all.
var ErrConsumerGone = errors.New("the consumer is gone")

// Puller asks consumers for messages and routes what they send to their
// pulls (Add). Its methods are safe for concurrent use. It is the handle
// of its work, shaped like jetstream.ConsumeContext: Stop ends it, and
// Closed tells when it ended.
type Puller struct {
	nc     *nats.Conn
	stream string // Config.Stream
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
	byID       map[uint64]*Pull     // status messages name the request's inbox
	byName     map[consumerOf]*Pull // events name their stream and consumer
	// pins are the pins the server gave this puller, by consumer (of
	// pinned pulls: Puller.AddPinned), from the last message that carried one; a
	// pin the server refused is forgotten.
	pins map[consumerOf]string
	// held is the bytes of the events the workers hold; starved are the
	// pulls that asked for nothing for want of room under the bounds.
	held    int64
	starved map[*Pull]struct{}
	// heldBy is held by group, for the groups that hold any.
	heldBy map[string]int64
	// turns are the groups' turns to stream (turns.go).
	turns turns

	stop   context.CancelFunc // set by Start
	closed chan struct{}
}

// Start returns a Puller of the consumers of cfg.Stream on nc, listening
// for the answers of its pull requests on one subscription of nc, and
// renewing them on a goroutine of its own until Stop. It fails if it
// cannot subscribe (the connection is closed).
func Start(nc *nats.Conn, cfg Config) (*Puller, error) {
	if cfg.Expiry <= 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.Turn <= 0 {
		cfg.Turn = DefaultTurn
	}
	p := newPuller(nc, cfg.Stream, cfg.Expiry, heldBytes{total: cfg.MaxHeldBytes, perPull: cfg.MaxHeldBytesPerPull})
	p.turns = newTurns(cfg.MaxStreamingPerGroup, cfg.Turn)
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
		stream:  stream,
		inbox:   nc.NewInbox() + ".",
		expiry:  expiry,
		bounds:  bounds,
		byID:    map[uint64]*Pull{},
		byName:  map[consumerOf]*Pull{},
		pins:    map[consumerOf]string{},
		starved: map[*Pull]struct{}{},
		heldBy:  map[string]int64{},
		turns:   newTurns(0, DefaultTurn),
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
	status := p.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	defer p.nc.RemoveStatusListener(status)
	tick := time.NewTicker(min(p.expiry/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.turns.stopped = true  // a rotation armed before does nothing
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
	lost := p.connected && !connected
	p.connected = connected
	if lost {
		for _, pl := range p.byID {
			if d, ok := pl.h.(Disconnected); ok && pl.priority != "" {
				d.Disconnected()
			}
		}
	}
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
	p.recall(now)
	p.rotate(now)
	for _, pl := range p.byID {
		if pl.pending > 0 && now.After(pl.expires.Add(grace)) {
			pl.pending = 0
		}
		pl.topUp()
	}
}
