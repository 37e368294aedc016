package connlimit

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
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

// Bound returns lis taking at most most connections at once, and sets
// srv's ConnState hook (after any srv had) to close idle connections for
// new ones past it. Serve srv on the listener returned, or on a listener
// made from it (TLS, a connection multiplexer): what wraps a connection
// closes it through the one Bound counted.
func Bound(srv *http.Server, lis net.Listener, most int) net.Listener {
	l := &limit{most: most, idle: map[net.Conn]time.Time{}}
	before := srv.ConnState
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		if before != nil {
			before(c, state)
		}
		l.track(c, state)
	}
	return &counted{Listener: netutil.LimitListener(lis, most), limit: l}
}

// limit counts the connections of a listener that takes at most most,
// and closes idle ones when all most are open.
type limit struct {
	most int
	mu   sync.Mutex
	open int                    // accepted and not closed, hijacked ones too
	idle map[net.Conn]time.Time // since when
}

// track is the server's ConnState hook.
func (l *limit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	switch state {
	case http.StateIdle:
		l.idle[c] = time.Now()
	default:
		delete(l.idle, c)
	}
	l.mu.Unlock()
	l.reclaim()
}

// opened and closed count a connection of the listener.
func (l *limit) opened() {
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
	l.reclaim()
}

func (l *limit) closed(c net.Conn) {
	l.mu.Lock()
	l.open--
	delete(l.idle, c)
	l.mu.Unlock()
}

// reclaim closes the connection idle the longest when all most are open.
func (l *limit) reclaim() {
	l.mu.Lock()
	var oldest net.Conn
	if l.open >= l.most {
		var since time.Time
		for c, t := range l.idle {
			if oldest == nil || t.Before(since) {
				oldest, since = c, t
			}
		}
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest != nil {
		_ = oldest.Close()
	}
}

// counted tells limit of the connections it accepts and of their closing.
type counted struct {
	net.Listener
	limit *limit
}

func (l *counted) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	conn := &countedConn{Conn: c}
	conn.release = func() { l.limit.closed(conn) }
	l.limit.opened()
	return conn, nil
}

// countedConn calls release once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
