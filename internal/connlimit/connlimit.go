package connlimit

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// maxDefault is the most connections DefaultMost gives, however high the
// file limit.
const maxDefault = 4096

// DefaultMost is a listener's bound when none is set: a quarter of the
// process's file limit (RLIMIT_NOFILE, whose soft limit Go raises to the
// hard one at start), at least 16 and at most 4,096.
func DefaultMost() int {
	return min(maxDefault, max(16, fileLimit()/4))
}

// DefaultPerSource is the most connections one source address holds at
// once on a listener bounded to most when PerSource is not given: an
// eighth of them, at least one. Eight addresses holding their whole share
// fill the listener; fewer leave room for everyone else.
func DefaultPerSource(most int) int {
	return max(most/8, 1)
}

// Option changes how Bound shares a listener's connections.
type Option func(*options)

// options are Bound's settings; perSource 0 is DefaultPerSource(most).
type options struct {
	perSource int
}

// PerSource bounds the connections one source address holds at once to
// n: one past it is closed as soon as it is accepted, before the server
// reads a byte of it, so that it never takes a slot other addresses need;
// only when one of the address's own connections is idle is that one
// closed for it instead. 0 is the default, DefaultPerSource(most); n of most or more lets one
// address take every slot (only the listener's bound is left). A negative
// n is a programming error and panics: validate configuration first.
//
// The source is the IP address of the connection's remote end, whatever
// it is: loopback is a source like any other (kfn dev's clients are all
// 127.0.0.1), and so is the address of a proxy, a load balancer or a NAT
// (a Service whose traffic is SNATed to a node's address, an ingress
// controller before the gateway): everyone behind it shares one share. A
// listener that only such a proxy reaches wants n of most. Every IPv6
// address is a source of its own. A connection without an IP address
// (a Unix socket) is bounded by the listener's bound only.
func PerSource(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("connlimit: PerSource(%d): the bound must be at least 0", n))
	}
	return func(o *options) { o.perSource = n }
}

// Bound returns lis taking at most most connections at once (most must be
// at least 1), at most PerSource of them from one address, and sets
// srv's ConnState hook (after any srv had) to follow each connection's
// state.
//
// When all most are open and another connection is accepted, Bound makes
// room for it by closing, one at a time, the connection idle the longest
// (a keep-alive connection between requests), or, when none is idle, the
// one that has waited the longest for its first request's headers to be
// read whole (http.StateNew, which counts from the moment it was
// accepted: a slow TLS handshake and a connection multiplexer's sniffing
// too). A connection whose request is being served (http.StateActive,
// its body included) or that was hijacked is never closed; when every
// connection is, the new one waits, and those after it wait in the
// kernel's queue, until one closes. The new connection holds its
// descriptor while it waits: at most most+1 are open.
//
// What this means for a client that sends slowly: nothing, while the
// listener has room. When it is full, the connections still sending their
// first headers are cut oldest first, so that a flood of connections
// which never finish their headers (slowloris) turns over instead of
// holding every slot: a client must then send its headers before it
// becomes the oldest of them (with n such connections and r new ones a
// second, within about n/r seconds: 4,096 at 300 a second, 13 s). An
// ordinary client sends them at once and is not affected; one that opens
// connections in advance and sends later (a preconnect) may find them
// closed and must retry on a new one. A body sent slowly is not cut here
// (the server's ReadTimeout bounds it): PerSource bounds how many of
// those one address holds.
//
// Serve srv on the listener returned, or on a listener made from it (TLS,
// a connection multiplexer): what wraps a connection closes it through
// the one Bound counted, and Bound finds it again in the hook through
// NetConn (as *tls.Conn has) or its addresses. Errors of lis's Accept are
// returned as they are: the server retries the temporary ones by their
// type.
func Bound(srv *http.Server, lis net.Listener, most int, opts ...Option) net.Listener {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.perSource == 0 {
		o.perSource = DefaultPerSource(most)
	}
	l := newLimit(most, o.perSource)
	before := srv.ConnState
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		if before != nil {
			before(c, state)
		}
		l.track(c, state)
	}
	return &counted{Listener: lis, limit: l}
}

// counted is a listener whose connections limit admits and counts.
type counted struct {
	net.Listener
	limit *limit
}

// Accept returns the next connection limit admits: one past its source's
// share is closed and the next one accepted.
func (l *counted) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err // as it is: http.Server retries net.Error's Temporary ones
		}
		conn, ok := l.limit.admit(c)
		if conn != nil {
			return conn, nil
		}
		if !ok {
			return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
		}
	}
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *counted) Close() error {
	err := l.Listener.Close()
	l.limit.close()
	return err
}

// countedConn is a connection limit admitted. Its fields but Conn and
// once are limit's, guarded by limit.mu.
type countedConn struct {
	net.Conn
	once  sync.Once
	limit *limit
	slot
}

// Close closes the connection and tells limit, once.
func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.limit.release(c) })
	return err
}
