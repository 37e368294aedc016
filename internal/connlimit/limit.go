package connlimit

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// limit counts the connections of a listener that takes at most most, at
// most perSource of them from one source, and closes idle ones, then ones
// still waiting for their first request, for new ones when all most are
// open.
type limit struct {
	most, perSource int

	mu sync.Mutex
	// room is signalled when a slot frees, when a connection becomes
	// idle (closable) and when the listener closes.
	room    sync.Cond
	closed  bool
	open    int // slots taken: admitted and not yet freed, hijacked ones too
	leaving int // of open, closed ones whose server has not yet let go
	sources map[string]*held
	conns   map[*countedConn]struct{}
	// served finds a connection by the net.Conn the server's hook names
	// (a *tls.Conn over it, a multiplexer's wrapper), and byAddrs by its
	// two TCP addresses, for wrappers without NetConn.
	served  map[net.Conn]*countedConn
	byAddrs map[string]*countedConn
}

// held is what one source holds: slots, and of them leaving ones.
type held struct{ open, leaving int }

// slot is what limit knows of one connection.
type slot struct {
	source string         // "" for no IP address
	addrs  string         // byAddrs's key, "" if none
	state  http.ConnState // as the server's hook last said; StateNew until it does
	since  time.Time      // accepted, or idle since
	server net.Conn       // the conn the server's hook names; nil until it does
	// fdClosed: Close was called. serverDone: the server let go (closed
	// or hijacked). leaving: counted in limit.leaving.
	fdClosed, serverDone, leaving bool
}

func newLimit(most, perSource int) *limit {
	l := &limit{
		most: most, perSource: perSource,
		sources: map[string]*held{},
		conns:   map[*countedConn]struct{}{},
		served:  map[net.Conn]*countedConn{},
		byAddrs: map[string]*countedConn{},
	}
	l.room.L = &l.mu
	return l
}

// admit counts c in, once there is a slot for it, closing a connection
// to make one when all are taken, or its source's idle one when the
// source holds its share (see Bound). It returns c counted, or nil and
// true when c's source holds its whole share busy, or nil and false when
// the listener closed; it closes c when it returns nil.
func (l *limit) admit(c net.Conn) (*countedConn, bool) {
	cc := &countedConn{Conn: c, limit: l, slot: slot{source: sourceOf(c.RemoteAddr()), addrs: addrsOf(c), state: http.StateNew}}
	l.mu.Lock()
	for {
		var v *countedConn
		switch src := l.sourceHolds(cc.source); {
		case l.closed:
			l.mu.Unlock()
			_ = c.Close()
			return nil, false
		case src != nil && src.open >= l.perSource:
			if src.open-src.leaving >= l.perSource {
				if v = l.oldestClosable(cc.source); v == nil {
					l.mu.Unlock()
					_ = c.Close()
					return nil, true
				}
			}
		case l.open < l.most:
			l.take(cc)
			l.mu.Unlock()
			return cc, true
		case l.open-l.leaving >= l.most:
			v = l.oldestClosable("")
		}
		if v == nil {
			l.room.Wait() // for a slot on its way, or something to close
			continue
		}
		l.leave(v)
		l.mu.Unlock()
		_ = v.Close() // the descriptor itself: a TLS close_notify could block
		l.mu.Lock()
	}
}

// sourceHolds is what source holds when it is bounded, or nil.
func (l *limit) sourceHolds(source string) *held {
	if source == "" || l.perSource >= l.most {
		return nil
	}
	return l.sources[source]
}

// leave counts cc, closed or about to be, as leaving.
func (l *limit) leave(cc *countedConn) {
	if cc.leaving {
		return
	}
	cc.leaving = true
	l.leaving++
	if cc.source != "" {
		l.sources[cc.source].leaving++
	}
}

// take counts cc in.
func (l *limit) take(cc *countedConn) {
	l.open++
	cc.since = time.Now()
	l.conns[cc] = struct{}{}
	if cc.source != "" {
		h := l.sources[cc.source]
		if h == nil {
			h = &held{}
			l.sources[cc.source] = h
		}
		h.open++
	}
	if cc.addrs != "" {
		l.byAddrs[cc.addrs] = cc
	}
}

// oldestClosable is the connection idle the longest, or else the one
// accepted the longest ago that has not finished its first request's
// headers, or nil. Of a source, only an idle one.
func (l *limit) oldestClosable(source string) *countedConn {
	var idle, fresh *countedConn
	for c := range l.conns {
		if c.fdClosed || c.leaving || c.serverDone || source != "" && c.source != source {
			continue
		}
		switch c.state {
		case http.StateIdle:
			if idle == nil || c.since.Before(idle.since) {
				idle = c
			}
		case http.StateNew:
			if fresh == nil || c.since.Before(fresh.since) {
				fresh = c
			}
		}
	}
	if idle != nil || source != "" {
		return idle
	}
	return fresh
}

// track is the server's ConnState hook.
func (l *limit) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cc := l.find(c)
	if cc == nil {
		return // freed already, or not of this listener
	}
	if cc.server == nil {
		cc.server = c
		l.served[c] = cc
	}
	switch state {
	case http.StateNew:
		// still counted from its accepting
	case http.StateIdle:
		cc.state, cc.since = state, time.Now()
		l.room.Broadcast()
	case http.StateClosed, http.StateHijacked:
		cc.state, cc.serverDone = state, true
		delete(l.served, c)
		if cc.fdClosed {
			l.free(cc)
		}
	default:
		cc.state = state
	}
}

// find is the connection the server's hook names c, or nil.
func (l *limit) find(c net.Conn) *countedConn {
	if cc, ok := l.served[c]; ok {
		return cc
	}
	for x := c; x != nil; {
		if cc, ok := x.(*countedConn); ok {
			if _, open := l.conns[cc]; open {
				return cc
			}
			return nil
		}
		u, ok := x.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		x = u.NetConn()
	}
	if k := addrsOf(c); k != "" {
		return l.byAddrs[k]
	}
	return nil
}

// release is told that cc's descriptor closed: its slot frees now, or
// when the server lets go of it if the server holds it.
func (l *limit) release(cc *countedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cc.fdClosed = true
	if _, open := l.conns[cc]; !open {
		return
	}
	if cc.server == nil || cc.serverDone {
		l.free(cc)
		return
	}
	l.leave(cc)
}

// free gives cc's slot back.
func (l *limit) free(cc *countedConn) {
	if _, open := l.conns[cc]; !open {
		return
	}
	delete(l.conns, cc)
	l.open--
	if cc.leaving {
		l.leaving--
	}
	if h := l.sources[cc.source]; h != nil {
		h.open--
		if cc.leaving {
			h.leaving--
		}
		if h.open == 0 {
			delete(l.sources, cc.source)
		}
	}
	if cc.server != nil && l.served[cc.server] == cc {
		delete(l.served, cc.server)
	}
	if cc.addrs != "" && l.byAddrs[cc.addrs] == cc {
		delete(l.byAddrs, cc.addrs)
	}
	l.room.Broadcast()
}

// close ends the waits of admit.
func (l *limit) close() {
	l.mu.Lock()
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
}

// sourceOf is the IP address a connection comes from, "" if none.
func sourceOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(t.IP); ok {
			return ip.Unmap().String()
		}
		return ""
	}
	if a == nil {
		return ""
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap().String()
	}
	return ""
}

// addrsOf identifies an open TCP connection by its two ends, "" for
// another kind.
func addrsOf(c net.Conn) string {
	r, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	return c.LocalAddr().String() + " " + r.String()
}
