package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ReconnectWait is how long a connection waits between attempts to
// (re)connect.
const ReconnectWait = 250 * time.Millisecond

// DefaultPingInterval is how often a connection asks the server whether it
// is there when Options.PingInterval is zero. A connection whose server
// leaves MaxPingsOutstanding pings unanswered is taken as lost and
// reconnects (to another server of a cluster): a server gone silent, its
// node's power cut or its packets dropped, is left after two to three
// intervals, 10-15 s, instead of nats.go's default of 2 minutes a ping.
const DefaultPingInterval = 5 * time.Second

// MaxPingsOutstanding is how many pings may go unanswered before the
// connection is taken as lost.
const MaxPingsOutstanding = 2

// Options are how a server connects.
type Options struct {
	// Name is the client name NATS shows for the connection (kfn-eventbridge,
	// kfn-scaler), and names its inboxes (InboxPrefix): one token of a
	// subject, without '.', '*', '>' or white space.
	Name string
	// Log receives a warning when the connection drops and an info line
	// when it is back; nil discards them.
	Log *slog.Logger
	// OnReconnect, if not nil, runs after each reconnect (NATS may be a new,
	// empty server then). It must not block.
	OnReconnect func()
	// Credentials are the user, password and CA the connection uses; the
	// zero value connects anonymously.
	Credentials Credentials
	// PingInterval is how often the connection checks that its server
	// answers; zero means DefaultPingInterval.
	PingInterval time.Duration
}

// InboxPrefix is the prefix of the inboxes (the subjects its replies come
// on: JetStream's answers, pulled messages, objects) of a connection
// named name: _INBOX.<name>. The chart's NATS lets each component's user
// subscribe to its own inboxes only, so that none reads the replies sent
// to another. Without a name, nats.go's _INBOX.
func InboxPrefix(name string) string {
	if name == "" {
		return "_INBOX"
	}
	return "_INBOX." + name
}

// ErrInvalidName is wrapped by Connect's error for an Options.Name that
// is not one token of a subject.
var ErrInvalidName = errors.New("invalid connection name")

// Connect connects to the NATS server(s) at url (comma-separated for a
// cluster). A server that is not up yet is no error: the connection keeps
// trying every ReconnectWait, as it does after any disconnect, forever.
// A server that refuses the credentials twice in a row closes the
// connection for good (nats.go's rule; Lost reports it), and a permission
// the server denies later is logged as a warning. A server that stops
// answering without closing the connection is left after
// MaxPingsOutstanding unanswered pings (Options.PingInterval) and the
// connection reconnects. The error says why the URL, the options or the
// credentials' files are refused.
func Connect(url string, o Options) (*nats.Conn, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds, err := o.Credentials.options()
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	if strings.ContainsAny(o.Name, ".*> \t\r\n") {
		return nil, fmt.Errorf("connect to NATS %s: %w: %q: want one token of a subject, without '.', '*', '>' or white space", url, ErrInvalidName, o.Name)
	}
	ping := o.PingInterval
	if ping <= 0 {
		ping = DefaultPingInterval
	}
	nc, err := nats.Connect(url, append(creds,
		nats.Name(o.Name),
		nats.CustomInboxPrefix(InboxPrefix(o.Name)),
		nats.PingInterval(ping),
		nats.MaxPingsOutstanding(MaxPingsOutstanding),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(ReconnectWait),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("disconnected from NATS", "error", err) }),
		nats.ReconnectHandler(func(*nats.Conn) {
			log.Info("reconnected to NATS")
			if o.OnReconnect != nil {
				o.OnReconnect()
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS error", "error", err) }),
	)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	return nc, nil
}

// ErrLost is wrapped by the error Lost sends: the connection closed for
// good while it was still wanted.
var ErrLost = errors.New("the NATS connection closed and will not come back")

// Lost returns a channel that receives, once, why nc closed if it closes
// while ctx is not done. nats.go reconnects after a dropped connection,
// but gives a connection up for good when the server answers with a
// protocol error (-ERR: a subject longer than the control line, a payload
// over the maximum, an authorization change) and closes it: nothing then
// makes it come back, and every publish and subscription on it fails. Its
// owner must then replace it or end, so that what supervises it (the
// kubelet, kfn dev's loop) starts it again. Lost takes nc's closed
// handler.
func Lost(ctx context.Context, nc *nats.Conn) <-chan error {
	ch := make(chan error, 1)
	nc.SetClosedHandler(func(c *nats.Conn) {
		if ctx.Err() != nil {
			return
		}
		reason := c.LastError()
		if reason == nil {
			reason = errors.New("closed")
		}
		ch <- fmt.Errorf("%w: %w", ErrLost, reason)
	})
	if nc.IsClosed() && ctx.Err() == nil {
		select {
		case ch <- fmt.Errorf("%w: closed before it was watched", ErrLost):
		default:
		}
	}
	return ch
}

// UntilLost blocks until nc closes for good (Lost), and returns that
// error, wrapping ErrLost; or until ctx ends, and returns nil. The event
// bridge and the scaler run it beside their parts, so that a connection
// that cannot come back ends them and what supervises them starts them
// again on a new one. It takes nc's closed handler.
func UntilLost(ctx context.Context, nc *nats.Conn) error {
	lost := Lost(ctx, nc)
	select {
	case err := <-lost:
		return err
	case <-ctx.Done():
		return nil
	}
}

// Live returns nil while nc is connected or trying to be, and an error
// once it is closed: what a liveness probe should say.
func Live(nc *nats.Conn) error {
	if nc.IsClosed() {
		return fmt.Errorf("%w: %v", ErrLost, nc.LastError())
	}
	return nil
}
