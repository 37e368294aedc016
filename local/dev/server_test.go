package dev

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openCounter is a listener that counts the connections open at once on
// the server's side (accepted and not yet closed) and the most it saw.
type openCounter struct {
	net.Listener
	open, most atomic.Int64
}

func (l *openCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for m := l.most.Load(); n > m && !l.most.CompareAndSwap(m, n); m = l.most.Load() {
	}
	return &closeOnce{Conn: c, closed: func() { l.open.Add(-1) }}, nil
}

type closeOnce struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *closeOnce) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.closed)
	return err
}

// serveTest serves h with newServer and lim on a loopback port and
// returns its address and the counter of its connections.
func serveTest(t *testing.T, h http.Handler, lim serverLimits) (string, *openCounter) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	counter := &openCounter{Listener: raw}
	srv, lis := newServer(h, counter, lim)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return raw.Addr().String(), counter
}

// readsBody answers with how much of the body it read, or 400 with the
// error that ended the reading.
var readsBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	time.Sleep(300 * time.Millisecond) // longer than the body's deadline: work after the body
	_, _ = io.WriteString(w, strings.Repeat("x", int(n)))
})

var testLimits = serverLimits{header: 2 * time.Second, body: 200 * time.Millisecond, idle: time.Minute, conns: 64}

// A body that never ends is cut at the body's deadline; a body read whole
// in time lifts it, and the request may then take longer.
func TestServerCutsABodyThatNeverEnds(t *testing.T) {
	addr, _ := serveTest(t, readsBody, testLimits)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /publish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 20 ms, never the end
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := io.WriteString(c, "1\r\nx\r\n"); err != nil {
					return
				}
			}
		}
	}()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "the server answers and closes instead of reading forever")
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "timeout")
	assert.Less(t, time.Since(start), 5*time.Second)

	resp2, err := http.Post("http://"+addr+"/publish", "text/plain", strings.NewReader("abc"))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp2.Body)
	resp2.Body.Close()
	assert.Equal(t, http.StatusOK, resp2.StatusCode, "a body read in time: the handler may work past the deadline")
	assert.Equal(t, "xxx", string(body))
}

// A keep-alive connection no request uses is closed after the idle
// timeout.
func TestServerClosesIdleConnections(t *testing.T) {
	lim := testLimits
	lim.idle = 200 * time.Millisecond
	addr, counter := serveTest(t, readsBody, lim)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the server closed the idle connection (not the test's deadline)")
	require.Eventually(t, func() bool { return counter.open.Load() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// At the bound, connections are no more than the bound (and the one
// accepted that waits for a slot), and a client that holds idle
// connections cannot keep another out: the idle ones are closed for it.
func TestServerBoundsConnectionsAndClosesIdleOnesForNewOnes(t *testing.T) {
	lim := testLimits
	lim.conns = 4
	addr, counter := serveTest(t, readsBody, lim)
	// The attacker: 16 connections, each one request and then idle.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 16 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
	}
	// The victim gets its answer on a connection of its own.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/")
	require.NoError(t, err, "the victim is served while the attacker holds idle connections")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.LessOrEqual(t, counter.most.Load(), int64(lim.conns)+1, "never more connections open than the bound and the one accepted that waits for a slot (connlimit.Bound)")
}
