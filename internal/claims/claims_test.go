package claims_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/claim"
	"github.com/kfn-dev/kfn/internal/claims"
)

// serve answers every claim with code and body; it returns a client of it.
func serve(t *testing.T, code int, body string) *claims.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer token-of-the-event-bridge", r.Header.Get("Authorization"))
		assert.Equal(t, http.MethodPost, r.Method)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return claims.NewClient(host, n, func() (string, error) { return "token-of-the-event-bridge", nil })
}

// TestClientReadsAnswersAndRefusals: a granted claim is its pod and
// address; each refusal its error; an answer that is too large, has
// unknown fields or names no address is an error, never a made-up
// address.
func TestClientReadsAnswersAndRefusals(t *testing.T) {
	ctx := context.Background()
	a, err := serve(t, 200, `{"pod":"kfn-pool-nodejs22-1","address":"10.244.0.9:8080"}`).Claim(ctx, "shop", "orders")
	require.NoError(t, err)
	assert.Equal(t, claim.Answer{Pod: "kfn-pool-nodejs22-1", Address: "10.244.0.9:8080"}, a)
	for code, want := range map[int]error{404: claim.ErrNotPooled, 409: claim.ErrServed, 503: claim.ErrNoStandby} {
		_, err := serve(t, code, "why").Claim(ctx, "shop", "orders")
		assert.ErrorIs(t, err, want)
		assert.Equal(t, code, claim.StatusOf(want))
	}
	for _, body := range []string{`{"pod":"p","address":"10.0.0.1"}`, `{"pod":"","address":"10.0.0.1:80"}`,
		`{"pod":"p","address":"10.0.0.1:80","extra":1}`, `{"pod":"p","address":"` + strings.Repeat("1", 5000) + `"}`, `not json`} {
		_, err := serve(t, 200, body).Claim(ctx, "shop", "orders")
		assert.Error(t, err, body)
	}
	// An answer of at most 4 KiB, white space included.
	good := `{"pod":"p","address":"10.0.0.1:80"}`
	_, err = serve(t, 200, good+strings.Repeat(" ", 4<<10-len(good))).Claim(ctx, "shop", "orders")
	assert.NoError(t, err, "exactly 4 KiB")
	_, err = serve(t, 200, good+strings.Repeat(" ", 4<<10-len(good)+1)).Claim(ctx, "shop", "orders")
	assert.ErrorContains(t, err, "over 4096 bytes")
	_, err = serve(t, 500, "broken").Claim(ctx, "shop", "orders")
	assert.ErrorContains(t, err, "answered 500: broken")
}

// TestClientFindsTheLeader: of the controller's addresses only the
// leader listens; the client finds it and keeps it.
func TestClientFindsTheLeader(t *testing.T) {
	var leader *httptest.Server
	asked := 0
	leader = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked++
		_, _ = w.Write([]byte(`{"pod":"p","address":"10.0.0.1:80"}`))
	}))
	// Every address the name resolves to listens on one port: the
	// leader on 127.0.0.2's, the other replica (127.0.0.1) not at all.
	// That port of 127.0.0.1 is held by a socket that does not listen, so
	// that no other process's server answers there (one did, under load).
	port := refusing(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		t.Skip("no 127.0.0.2 here:", err)
	}
	leader.Listener = ln
	leader.Start()
	t.Cleanup(leader.Close)
	c := claims.NewClient("controller.kfn-system.svc", port, func() (string, error) { return "t", nil })
	claims.SetLookup(c, func(context.Context, string) ([]string, error) { return []string{"127.0.0.1", "127.0.0.2"}, nil })
	for range 3 {
		_, err := c.Claim(context.Background(), "shop", "orders")
		require.NoError(t, err)
	}
	assert.Equal(t, 3, asked)
	leader.Close()
	_, err = c.Claim(context.Background(), "shop", "orders")
	assert.ErrorIs(t, err, claim.ErrNoLeader)
}

// refusing binds a TCP socket to a free port of 127.0.0.1 without
// listening, until the test ends, and returns the port: connections to it
// are refused, and no other socket can listen there meanwhile.
func refusing(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return sa.(*syscall.SockaddrInet4).Port
}

// TestClientWarmsTheLeader: Warm POSTs claim.WarmPath with the client's
// token to the leader, found as a claim finds it, and is nil on 204 only;
// KeepWarm sends it again each interval until its context ends.
func TestClientWarmsTheLeader(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	code := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, http.MethodPost, r.Method)
		assert.Equal(t, "Bearer token-of-the-event-bridge", r.Header.Get("Authorization"))
		mu.Lock()
		paths[r.URL.Path]++
		c := code
		mu.Unlock()
		w.WriteHeader(c)
		if c != http.StatusNoContent {
			_, _ = w.Write([]byte("not allowed"))
		}
	}))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	c := claims.NewClient(host, n, func() (string, error) { return "token-of-the-event-bridge", nil })

	require.NoError(t, c.Warm(context.Background()))
	mu.Lock()
	assert.Equal(t, map[string]int{claim.WarmPath: 1}, paths, "one warm-up, no claim")
	code = http.StatusForbidden
	mu.Unlock()
	assert.ErrorContains(t, c.Warm(context.Background()), "answered 403: not allowed")

	mu.Lock()
	code = http.StatusNoContent
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.KeepWarm(ctx, 5*time.Millisecond)
		close(done)
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return paths[claim.WarmPath] >= 5
	}, 10*time.Second, 5*time.Millisecond, "again each interval")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("KeepWarm did not end with its context")
	}
}
