package natstest

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Proxy forwards TCP connections to a Server. Cut drops every connection
// through it at once and refuses new ones until Restore: its clients lose
// the server without a word from it, as when the server is killed or the
// network between them fails. A Shutdown cannot show that: the server
// tells its clients and their pull requests that it is going.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// Proxy starts a proxy to s on a random loopback port, closed when the
// test ends. It follows s across Restart and Wipe, which keep the port.
func (s *Server) Proxy() *Proxy {
	s.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatalf("proxy listener: %v", err)
	}
	p := &Proxy{t: s.t, ln: ln, target: net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	s.t.Cleanup(p.close)
	return p
}

// URL is the client URL of the server through the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Connect returns a client connection through the proxy that reconnects
// forever, as Server.Connect's does, closed when the test ends.
func (p *Proxy) Connect() *nats.Conn {
	p.t.Helper()
	nc, err := nats.Connect(p.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		p.t.Fatalf("connect to nats through the proxy: %v", err)
	}
	p.t.Cleanup(nc.Close)
	return nc
}

// Cut closes every connection through the proxy, both ways, and refuses
// new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.wg.Add(1)
		go p.forward(client)
	}
}

// forward joins client to a new connection to the server until either
// side ends or the proxy is cut.
func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := p.dial(client)
	if err != nil {
		_ = client.Close()
		return
	}
	var done sync.WaitGroup
	for _, pair := range [][2]net.Conn{{server, client}, {client, server}} {
		done.Go(func() {
			_, _ = io.Copy(pair[0], pair[1])
			// One way ended: end both, as a lost connection does.
			_ = pair[0].Close()
			_ = pair[1].Close()
		})
	}
	done.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// dial connects to the server and registers both connections for Cut,
// unless the proxy is cut.
func (p *Proxy) dial(client net.Conn) (net.Conn, error) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if cut {
		return nil, errors.New("cut")
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut { // cut while dialing
		_ = server.Close()
		return nil, errors.New("cut")
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	return server, nil
}
