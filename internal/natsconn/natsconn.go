package natsconn

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// ReconnectWait is how long a connection waits between attempts to
// (re)connect.
const ReconnectWait = 250 * time.Millisecond

// Options are how a server connects.
type Options struct {
	// Name is the client name NATS shows for the connection (kfn-eventbridge,
	// kfn-scaler).
	Name string
	// Log receives a warning when the connection drops and an info line
	// when it is back; nil discards them.
	Log *slog.Logger
	// OnReconnect, if not nil, runs after each reconnect (NATS may be a new,
	// empty server then). It must not block.
	OnReconnect func()
}

// Connect connects to the NATS server(s) at url (comma-separated for a
// cluster). A server that is not up yet is no error: the connection keeps
// trying every ReconnectWait, as it does after any disconnect, forever.
// The error says why the URL or the options are refused.
func Connect(url string, o Options) (*nats.Conn, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nc, err := nats.Connect(url,
		nats.Name(o.Name),
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
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	return nc, nil
}
