package natsfault

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections from its own address to a NATS server's.
type Proxy struct {
	ln     net.Listener
	target string

	mu          sync.Mutex
	conns       map[*link]struct{}
	partitioned bool // new connections are refused until Heal
	wg          sync.WaitGroup
}

// link is one client's connection through the proxy: what goes to the
// client goes through write, so that a fault can put its own line in
// between whole writes.
type link struct {
	client, server net.Conn
	mu             sync.Mutex // guards writes to client
	silent         atomic.Bool
}

func (l *link) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client.Write(b)
}

// Start starts a proxy on a loopback port to the NATS server at serverURL
// (nats://host:port), stopped when the test ends.
func Start(t testing.TB, serverURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("natsfault: server URL %q: %v", serverURL, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natsfault: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

// URL is the address clients connect to instead of the server's.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		partitioned := p.partitioned
		p.mu.Unlock()
		if partitioned {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, l, s) // server to client, through the link
		go p.pipe(l, s, c) // client to server
	}
}

// pipe copies from src to dst until either side ends, then closes the
// link; once the link is silent it reads and drops what comes.
func (p *Proxy) pipe(l *link, dst io.Writer, src io.Reader) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
	_ = l.client.Close()
	_ = l.server.Close()
}

// Refuse makes every connection through the proxy end as the server ends
// one after a protocol error: the line "-ERR '<reason>'" to the client
// after the last whole write, then the close. nats.go closes such a
// connection for good. It returns how many connections it ended.
func (p *Proxy) Refuse(reason string) int {
	return p.each(func(l *link) {
		l.mu.Lock()
		defer l.mu.Unlock()
		_, _ = io.WriteString(l.client, "-ERR '"+reason+"'\r\n")
		_ = l.server.Close()
		_ = l.client.Close()
	})
}

// Cut ends every connection through the proxy without a word to either
// side, as a killed server or a partition does; clients reconnect (through
// the proxy again). It returns how many connections it ended.
func (p *Proxy) Cut() int {
	return p.each(func(l *link) {
		_ = l.server.Close()
		_ = l.client.Close()
	})
}

// Partition ends every connection through the proxy without a word, as
// Cut does, and refuses new ones until Heal: the clients lose the server
// for as long as the test wants (to restart it behind them, say, so that
// its shutdown notice reaches none of them). It returns how many
// connections it ended.
func (p *Proxy) Partition() int {
	p.mu.Lock()
	p.partitioned = true
	p.mu.Unlock()
	return p.Cut()
}

// Silence makes every open connection through the proxy carry nothing
// more either way while it stays open, as a server whose node lost power
// or whose packets are dropped: neither side hears of it, and only the
// client's own pings can tell. New connections go through as before (the
// client reaching another server of a cluster). It returns how many
// connections it silenced.
func (p *Proxy) Silence() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.silent.Store(true)
	}
	return len(p.conns)
}

// Heal lets connections through again after Partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.partitioned = false
	p.mu.Unlock()
}

// each applies f to every open connection; it returns how many there were.
func (p *Proxy) each(f func(*link)) int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.conns = map[*link]struct{}{}
	p.mu.Unlock()
	for _, l := range links {
		f(l)
	}
	return len(links)
}

func (p *Proxy) stop() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
