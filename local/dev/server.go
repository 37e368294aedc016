package dev

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/connlimit"
)

// Bounds of what one client can hold of kfn dev's port, as the event
// bridge's servers bound it in a cluster.
const (
	// readHeaderTimeout bounds a request's headers, from the moment its
	// connection is ready for one.
	readHeaderTimeout = 10 * time.Second
	// bodyTimeout bounds the reading of a request's body (a body that
	// never ends). It is not the server's ReadTimeout, which would also
	// end the requests that stream answers (the web view's events, `kfn
	// logs -f`) and long gateway calls once their body is read.
	bodyTimeout = 30 * time.Second
	// idleTimeout closes a keep-alive connection no request uses.
	idleTimeout = 2 * time.Minute
)

// DefaultMaxConnections is Config.MaxConnections's default: a quarter of
// the process's file limit (RLIMIT_NOFILE, whose soft limit Go raises to
// the hard one at start), at most 4,096, so that the connections of
// clients can never take the descriptors the broker's store, the function
// processes, the deliveries and the project watcher need.
func DefaultMaxConnections() int { return connlimit.DefaultMost() }

// serverLimits are the bounds of kfn dev's HTTP server.
type serverLimits struct {
	header, body, idle time.Duration
	conns              int
}

// newServer returns kfn dev's HTTP server for h, bounded by lim, and
// the listener to serve it on, lis bounded to lim.conns connections.
// Past that many, the server closes an idle keep-alive connection
// whenever a connection is opened or becomes idle (a client that holds
// idle connections cannot keep others out), and new ones wait in the
// kernel's queue to be accepted until one closes: a connection that
// sends nothing ends at lim.header, a body that never ends at lim.body.
func newServer(h http.Handler, lis net.Listener, lim serverLimits) (*http.Server, net.Listener) {
	srv := &http.Server{
		Handler:           bodyDeadline(h, lim.body),
		ReadHeaderTimeout: lim.header,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    publisher.MaxHeaderBytes,
	}
	// Every client of kfn dev is on this machine (one address): the
	// listener's bound is theirs.
	return srv, connlimit.Bound(srv, lis, lim.conns, connlimit.PerSource(lim.conns))
}

// bodyDeadline gives the reading of every request body d: past it the
// body's reads fail and the server closes the connection. The deadline is
// lifted when the body has been read whole, so that a request that then
// takes long (a gateway call, a stream) is not cut; the connection's next
// request gets the server's own timeouts.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // not a connection of net/http's: nothing to bound
			return
		}
		b := &deadlineBody{ReadCloser: r.Body, rc: rc}
		r.Body = b
		h.ServeHTTP(w, r)
		b.mu.Lock()
		b.served = true // the connection may be serving the next request
		b.mu.Unlock()
	})
}

// deadlineBody lifts its connection's read deadline once read whole.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	mu     sync.Mutex
	served bool // the handler returned: rc must not be used
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		if !b.served && !b.lifted {
			b.lifted = true
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.mu.Unlock()
	}
	return n, err
}
