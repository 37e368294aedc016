package connlimit_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/soheilhy/cmux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/connlimit"
)

// The two sources of these tests: both are loopback, and on Linux a
// socket can be bound to any address of 127.0.0.0/8 without setup.
const (
	victimIP   = "127.0.0.1"
	attackerIP = "127.0.0.2"
)

// waitFor bounds every wait of these tests for a condition.
const waitFor = 5 * time.Second

// states is a server's own ConnState hook: the state of each of its
// connections, by the connection's source address.
type states struct {
	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

func (s *states) hook(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		delete(s.conns, c)
		return
	}
	s.conns[c] = st
}

// count is how many connections from ip are in st.
func (s *states) count(ip string, st http.ConnState) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c, cst := range s.conns {
		if host, _, _ := net.SplitHostPort(c.RemoteAddr().String()); host == ip && cst == st {
			n++
		}
	}
	return n
}

// open is how many connections the server holds.
func (s *states) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// serve starts h behind Bound(most), one source holding at most
// perSource of them, and returns the server and its hook. Its header and
// read timeouts are far longer than any wait of the tests: nothing but
// the bound makes room. muxed serves it behind a connection multiplexer
// (cmux, as the gateway's port that takes TLS and plain HTTP), whose
// connections have no NetConn.
func serve(t *testing.T, most, perSource int, h http.Handler, muxed bool) (*httptest.Server, *states) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadHeaderTimeout = time.Minute
	srv.Config.ReadTimeout = time.Minute
	hook := &states{conns: map[net.Conn]http.ConnState{}}
	srv.Config.ConnState = hook.hook
	srv.Listener = connlimit.Bound(srv.Config, srv.Listener, most, connlimit.PerSource(perSource))
	if muxed {
		m := cmux.New(srv.Listener)
		srv.Listener = m.Match(cmux.Any()) // closing it closes the bounded listener, and ends Serve
		served := make(chan error, 1)
		go func() { served <- m.Serve() }()
		t.Cleanup(func() { <-served })
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, hook
}

// dialFrom opens a TCP connection from ip to lis.
func dialFrom(ctx context.Context, ip string, lis net.Listener) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return d.DialContext(ctx, "tcp", lis.Addr().String())
}

// clientFrom is a client of srv whose connections come from ip, with a
// transport of its own (its idle connections are its own) and timeout.
func clientFrom(t *testing.T, ip string, timeout time.Duration) (*http.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}, tr
}

// get fetches url with c and returns its status and body.
func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// closedAtOnce asserts that the server closes c (a read ends, not by the
// deadline) within waitFor.
func closedAtOnce(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitFor)))
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err, msg)
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "%s: %v", msg, err)
}

// slowHeaders is a slowloris client: from ip, it opens a connection and
// sends the headers of a request that never ends, one byte every 200 ms;
// when the server closes it, it opens another. started is told once, when
// its first connection has sent its first byte.
func slowHeaders(ctx context.Context, ip string, srv *httptest.Server, started chan<- struct{}) {
	const headers = "GET / HTTP/1.1\r\nHost: x\r\n"
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, ip, srv.Listener)
		for i := 0; err == nil; i++ {
			b := byte('a')
			if i < len(headers) {
				b = headers[i]
			}
			if _, err = c.Write([]byte{b}); err == nil && started != nil {
				started <- struct{}{}
				started = nil
			}
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-tick.C:
			}
		}
		if c != nil {
			_ = c.Close()
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// TestSlowHeadersDoNotKeepOthersOut: at a bound of four, four connections
// of one address that send their headers a byte every 200 ms do not keep
// another address's request out (it is answered within a client's
// timeout of 3 s, the server's header timeout being a minute), whether one
// address may hold every slot (the connections still sending headers are
// closed, oldest first, for new ones; behind a multiplexer too) or the
// default share.
func TestSlowHeadersDoNotKeepOthersOut(t *testing.T) {
	tests := map[string]struct {
		perSource int
		muxed     bool
	}{
		"default share":                                         {perSource: 0},
		"one address may hold every slot":                       {perSource: 4},
		"one address may hold every slot, behind a multiplexer": {perSource: 4, muxed: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv, _ := serve(t, 4, tt.perSource, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("ok"))
			}), tt.muxed)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); wg.Wait() })
			started := make(chan struct{}, 4)
			for range 4 {
				wg.Go(func() { slowHeaders(ctx, attackerIP, srv, started) })
			}
			for range 4 {
				select {
				case <-started:
				case <-time.After(waitFor):
					require.FailNow(t, "the attackers did not connect")
				}
			}
			victim, _ := clientFrom(t, victimIP, 3*time.Second)
			status, body, err := get(victim, srv.URL)
			require.NoError(t, err, "answered while another address sends headers slowly")
			assert.Equal(t, http.StatusOK, status)
			assert.Equal(t, "ok", body)
		})
	}
}

// TestOneAddressGetsItsShareOnly: at a bound of four and two a source,
// a third connection from one address is closed at once, the two it holds
// are kept, and another address still gets a slot.
func TestOneAddressGetsItsShareOnly(t *testing.T) {
	srv, hook := serve(t, 4, 2, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}), false)
	ctx := context.Background()
	for i := range 2 {
		c, err := dialFrom(ctx, attackerIP, srv.Listener)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = c.Write([]byte("GET / HTTP/1.1\r\n"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return hook.count(attackerIP, http.StateNew) == i+1 }, waitFor, 10*time.Millisecond)
	}
	third, err := dialFrom(ctx, attackerIP, srv.Listener)
	require.NoError(t, err)
	t.Cleanup(func() { _ = third.Close() })
	closedAtOnce(t, third, "a connection past its address's share")

	victim, _ := clientFrom(t, victimIP, 3*time.Second)
	status, body, err := get(victim, srv.URL)
	require.NoError(t, err, "another address gets a slot")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, hook.count(attackerIP, http.StateNew), "the address keeps its share")
}

// response is what a client got.
type response struct {
	status int
	body   string
	err    error
}

// TestHeadersInProgressAreReclaimedButRequestsAreNot: at a bound of two,
// with one request in its handler and one connection still sending its
// headers, a new request is served: the connection sending headers is
// closed for it. Then, with two requests in their handlers, a third waits
// and neither is cut: all three are answered once the handlers return.
// The same behind a multiplexer, whose connections Bound finds by their
// addresses.
func TestHeadersInProgressAreReclaimedButRequestsAreNot(t *testing.T) {
	for name, muxed := range map[string]bool{"plain": false, "behind a multiplexer": true} {
		t.Run(name, func(t *testing.T) { headersInProgressAreReclaimedButRequestsAreNot(t, muxed) })
	}
}

func headersInProgressAreReclaimedButRequestsAreNot(t *testing.T, muxed bool) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv, hook := serve(t, 2, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	}), muxed)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // before the server's Close waits for the handlers
		}
	})
	fetch := func(path string) <-chan response {
		c, _ := clientFrom(t, victimIP, 20*time.Second)
		done := make(chan response, 1)
		go func() {
			status, body, err := get(c, srv.URL+path)
			done <- response{status, body, err}
		}()
		return done
	}
	awaitEntered := func() {
		select {
		case <-entered:
		case <-time.After(waitFor):
			require.FailNow(t, "the handler was not entered")
		}
	}

	first := fetch("/block")
	awaitEntered()
	slow, err := dialFrom(context.Background(), victimIP, srv.Listener)
	require.NoError(t, err)
	t.Cleanup(func() { _ = slow.Close() })
	_, err = slow.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return hook.count(victimIP, http.StateNew) == 1 }, waitFor, 10*time.Millisecond)

	c, tr := clientFrom(t, victimIP, 3*time.Second)
	status, _, err := get(c, srv.URL)
	require.NoError(t, err, "served: the connection still sending headers makes room")
	assert.Equal(t, http.StatusOK, status)
	closedAtOnce(t, slow, "the connection still sending headers is reclaimed")

	tr.CloseIdleConnections()
	require.Eventually(t, func() bool { return hook.open() == 1 }, waitFor, 10*time.Millisecond)
	second := fetch("/block")
	awaitEntered()
	third := fetch("/")
	assert.Never(t, func() bool { return len(first)+len(second)+len(third) > 0 }, 500*time.Millisecond, 10*time.Millisecond,
		"no request in its handler is cut, and the third waits for a slot")
	close(release)
	for name, done := range map[string]<-chan response{"first": first, "second": second, "third": third} {
		select {
		case r := <-done:
			require.NoError(t, r.err, name)
			assert.Equal(t, http.StatusOK, r.status, name)
			assert.Equal(t, "ok", r.body, name)
		case <-time.After(waitFor):
			require.FailNow(t, "not answered", name)
		}
	}
}

// TestAnAddressAtItsShareTradesItsIdleConnection: an address holding its
// whole share, one idle keep-alive connection, gets a new connection: its
// idle one is closed for it.
func TestAnAddressAtItsShareTradesItsIdleConnection(t *testing.T) {
	srv, hook := serve(t, 8, 1, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}), false)
	for i := range 3 { // each a transport of its own: a new connection
		c, _ := clientFrom(t, attackerIP, 3*time.Second)
		status, _, err := get(c, srv.URL)
		require.NoError(t, err, "request %d", i)
		assert.Equal(t, http.StatusOK, status)
		require.Eventually(t, func() bool { return hook.count(attackerIP, http.StateIdle) == 1 && hook.open() == 1 }, waitFor, 10*time.Millisecond,
			"one idle connection, the newest")
	}
}

// TestClosingTheListenerEndsAWaitForASlot: at a bound of one, held by a
// request in its handler, a new connection waits for a slot in Accept;
// closing the listener (as Shutdown does) ends Serve all the same.
func TestClosingTheListenerEndsAWaitForASlot(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
	})}
	lis, err := net.Listen("tcp", victimIP+":0")
	require.NoError(t, err)
	lis = connlimit.Bound(srv, lis, 1)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + lis.Addr().String()

	c, _ := clientFrom(t, victimIP, 20*time.Second)
	go func() { _, _, _ = get(c, url) }()
	select {
	case <-entered:
	case <-time.After(waitFor):
		require.FailNow(t, "the handler was not entered")
	}
	waiting, err := dialFrom(context.Background(), victimIP, lis)
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiting.Close() })
	_, err = waiting.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	assert.Never(t, func() bool { return len(served) > 0 }, 200*time.Millisecond, 10*time.Millisecond, "Serve waits for a slot")

	require.NoError(t, lis.Close())
	select {
	case err := <-served:
		assert.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(waitFor):
		require.FailNow(t, "Serve did not end")
	}
	closedAtOnce(t, waiting, "the connection that waited is closed")
}

// TestOneConnectionIsClosedForEachNewOne: at a bound of four, held by four
// idle keep-alive connections, a new connection has one of them closed for
// it, not more: while the one closed is on its way out (its server has not
// let go of it yet: here the server's own ConnState hook holds the news
// of its closing), the new one waits for that slot rather than closing
// another; it is served once the server lets go.
func TestOneConnectionIsClosedForEachNewOne(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	letGo := make(chan struct{})
	var idleConns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateIdle:
			idleConns.Add(1)
		case http.StateClosed:
			select { // the server lets go once the test says so
			case <-letGo:
			case <-time.After(waitFor):
			}
		}
	}
	srv.Listener = connlimit.Bound(srv.Config, srv.Listener, 4, connlimit.PerSource(4))
	srv.Start()
	t.Cleanup(srv.Close)
	var idle []net.Conn
	for range 4 {
		c, err := dialFrom(context.Background(), attackerIP, srv.Listener)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		idle = append(idle, c)
	}
	require.Eventually(t, func() bool { return idleConns.Load() == 4 }, waitFor, 10*time.Millisecond)

	served := make(chan error, 1)
	go func() {
		victim, _ := clientFrom(t, victimIP, 2*waitFor)
		_, _, err := get(victim, srv.URL)
		served <- err
	}()
	closed := func() int {
		n := 0
		for _, c := range idle {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return closed() >= 1 }, waitFor, 10*time.Millisecond, "one idle connection closed for the new one")
	assert.Never(t, func() bool { return closed() > 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"no other closed while the first is on its way out")
	close(letGo)
	require.NoError(t, <-served, "the new one is served once the server let go")
}
