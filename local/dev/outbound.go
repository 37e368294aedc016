package dev

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// dialFunc is http.Transport's DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// outboundConns bounds the connections the dispatcher holds to the
// functions' processes (each HTTP/1.1 delivery in flight holds one): at
// most perNamespace to the processes of one namespace, and total to all,
// so that a tenant's slow sinks with many events in flight (up to 1,000
// per Subscription) cannot take the descriptors kfn dev needs; the
// deliveries past a bound wait for a connection, within their timeout.
// Connections to an address that is no function's share one more bound
// of perNamespace.
type outboundConns struct {
	total        chan struct{}
	perNamespace int
	// namespaceOf names the namespace of the function listening on a
	// host:port.
	namespaceOf func(addr string) (string, bool)
	// closeIdle closes the transport's idle connections: those kept for
	// one function must not hold its namespace's connections from its
	// others.
	closeIdle func()

	mu         sync.Mutex
	namespaces map[string]chan struct{}
}

func newOutboundConns(total, perNamespace int, namespaceOf func(string) (string, bool)) *outboundConns {
	return &outboundConns{total: make(chan struct{}, total), perNamespace: perNamespace, namespaceOf: namespaceOf,
		closeIdle: func() {}, namespaces: map[string]chan struct{}{}}
}

// bound makes t's connections count against o.
func (o *outboundConns) bound(t *http.Transport) {
	o.closeIdle = t.CloseIdleConnections
	t.DialContext = o.dial(t.DialContext)
}

// slots returns the semaphore of namespace.
func (o *outboundConns) slots(namespace string) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.namespaces[namespace]
	if !ok {
		s = make(chan struct{}, o.perNamespace)
		o.namespaces[namespace] = s
	}
	return s
}

// acquire takes a slot of s, waiting until ctx ends; when none is free,
// the transport's idle connections are closed first.
func (o *outboundConns) acquire(ctx context.Context, s chan struct{}) error {
	select {
	case s <- struct{}{}:
		return nil
	default:
	}
	o.closeIdle()
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dial wraps base: a connection is made once its namespace and the total
// have a slot for it, which it gives back when closed.
func (o *outboundConns) dial(base dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		namespace, _ := o.namespaceOf(addr)
		ns := o.slots(namespace)
		if err := o.acquire(ctx, ns); err != nil {
			return nil, fmt.Errorf("wait for one of namespace %q's %d connections: %w", namespace, o.perNamespace, err)
		}
		if err := o.acquire(ctx, o.total); err != nil {
			<-ns
			return nil, fmt.Errorf("wait for one of the dispatcher's %d connections: %w", cap(o.total), err)
		}
		release := func() { <-o.total; <-ns }
		c, err := base(ctx, network, addr)
		if err != nil {
			release()
			return nil, err
		}
		return &releasingConn{Conn: c, release: release}, nil
	}
}

// releasingConn calls release once, when closed.
type releasingConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
