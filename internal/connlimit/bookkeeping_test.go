package connlimit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/soheilhy/cmux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/connlimit"
)

// TestEverySourceIsForgottenOnceItsConnectionsClose: forty addresses, at
// a bound of eight and two a source, each make a request on a keep-alive
// connection, open one they close at once and one they leave sending its
// headers, or over TLS in its handshake (the listener, full, closes idle
// and fresh ones for new ones).
// The listener never keeps more sources than slots, and once every
// connection is closed and the server let go of it, it keeps nothing: no
// entry of any source, of any connection, no slot taken nor leaving. Over
// plain HTTP, TLS and behind a multiplexer (found by addresses).
func TestEverySourceIsForgottenOnceItsConnectionsClose(t *testing.T) {
	for _, kind := range []string{"plain", "tls", "behind a multiplexer"} {
		t.Run(kind, func(t *testing.T) { everySourceIsForgotten(t, kind) })
	}
}

func everySourceIsForgotten(t *testing.T, kind string) {
	const most, sources = 8, 40
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ReadHeaderTimeout = time.Minute
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes cut
	bounded := connlimit.Bound(srv.Config, srv.Listener, most, connlimit.PerSource(2))
	srv.Listener = bounded
	if kind == "behind a multiplexer" {
		m := cmux.New(bounded)
		srv.Listener = m.Match(cmux.Any())
		served := make(chan error, 1)
		go func() { served <- m.Serve() }()
		t.Cleanup(func() { <-served })
	}
	if kind == "tls" {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)

	ctx := context.Background()
	var transports []*http.Transport
	var sending []net.Conn
	t.Cleanup(func() {
		for _, c := range sending {
			_ = c.Close()
		}
	})
	for i := range sources {
		ip := fmt.Sprintf("127.0.0.%d", 10+i)
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext
		t.Cleanup(tr.CloseIdleConnections)
		transports = append(transports, tr)
		status, _, err := get(&http.Client{Transport: tr, Timeout: waitFor}, srv.URL)
		require.NoError(t, err, "a request from %s", ip)
		assert.Equal(t, http.StatusOK, status)

		c, err := dialFrom(ctx, ip, bounded)
		require.NoError(t, err)
		_ = c.Close()

		c, err = dialFrom(ctx, ip, bounded)
		require.NoError(t, err)
		sending = append(sending, c)
		if kind != "tls" { // over TLS, it waits in its handshake
			_, err = c.Write([]byte("GET / HTTP/1.1\r\n"))
			require.NoError(t, err)
		}

		require.LessOrEqual(t, connlimit.KeptBy(bounded).Sources, most, "sources kept after %d of them, more than slots", i+1)
	}

	for _, c := range sending {
		_ = c.Close()
	}
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, connlimit.Kept{}, connlimit.KeptBy(bounded), "what the listener keeps once every connection closed")
	}, waitFor, 10*time.Millisecond)
}

// TestASourceAtItsShareHasOneClosedForEachNewOne: at a bound of eight and
// two a source, an address holding its share, two idle keep-alive
// connections, gets a new connection: its idle one idle the longest is
// closed for it, not more. While that one is on its way out (the server
// has not let go of it: its own ConnState hook holds the news) the new
// one waits for its slot, neither closing the address's other idle
// connection nor being closed; it is served once the server lets go. The
// address then holds its share again, none of it leaving, and its next
// new connection has its oldest idle one closed for it and is served, as
// is another address's request.
func TestASourceAtItsShareHasOneClosedForEachNewOne(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ReadHeaderTimeout = time.Minute
	letGo := make(chan struct{})
	var once sync.Once
	letGoNow := func() { once.Do(func() { close(letGo) }) }
	hook := &states{conns: map[net.Conn]http.ConnState{}}
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		hook.hook(c, st)
		if st == http.StateClosed {
			select { // the server lets go once the test says so
			case <-letGo:
			case <-time.After(waitFor):
			}
		}
	}
	bounded := connlimit.Bound(srv.Config, srv.Listener, 8, connlimit.PerSource(2))
	srv.Listener = bounded
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(letGoNow) // before the server's Close

	idleFrom := func(ip string) net.Conn {
		t.Helper()
		c, err := dialFrom(context.Background(), ip, bounded)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return c
	}
	// request sends a request from ip on a new connection and tells
	// whether it was answered.
	request := func(ip string) <-chan error {
		answered := make(chan error, 1)
		c, err := dialFrom(context.Background(), ip, bounded)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(2 * waitFor))
			_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					err = resp.Body.Close()
				}
			}
			answered <- err
		}()
		return answered
	}
	awaitAnswer := func(answered <-chan error, msg string) {
		t.Helper()
		select {
		case err := <-answered:
			require.NoError(t, err, msg)
		case <-time.After(waitFor):
			require.FailNow(t, "not answered", msg)
		}
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}

	oldest := idleFrom(attackerIP)
	require.Eventually(t, func() bool { return hook.count(attackerIP, http.StateIdle) == 1 }, waitFor, 10*time.Millisecond)
	other := idleFrom(attackerIP)
	require.Eventually(t, func() bool { return hook.count(attackerIP, http.StateIdle) == 2 }, waitFor, 10*time.Millisecond)

	first := request(attackerIP)
	require.Eventually(t, func() bool { return closed(oldest) }, waitFor, 10*time.Millisecond, "the idle one idle the longest is closed for the new one")
	open, leaving, _ := connlimit.HeldBy(bounded, attackerIP)
	assert.Equal(t, 2, open, "the address's slots while the one closed is on its way out")
	assert.Equal(t, 1, leaving, "of them leaving, until the server lets go")
	assert.Never(t, func() bool { return closed(other) || len(first) > 0 }, 300*time.Millisecond, 10*time.Millisecond,
		"no other closed while the first is on its way out, and the new one waits for its slot")
	letGoNow()
	awaitAnswer(first, "the new one is served once the server let go")
	open, leaving, _ = connlimit.HeldBy(bounded, attackerIP)
	assert.Equal(t, 2, open, "the address holds its share again")
	assert.Equal(t, 0, leaving, "none of it leaving")

	second := request(attackerIP)
	require.Eventually(t, func() bool { return closed(other) }, waitFor, 10*time.Millisecond, "the idle one idle the longest is closed for the next one")
	awaitAnswer(second, "the next one is served")
	victim, _ := clientFrom(t, victimIP, 3*time.Second)
	status, _, err := get(victim, srv.URL)
	require.NoError(t, err, "another address is served")
	assert.Equal(t, http.StatusOK, status)
}
