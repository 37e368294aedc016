package dev

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// A tenant whose sink never answers, with many deliveries in flight,
// holds at most its namespace's connections; another tenant's deliveries
// still get theirs, and all of them together no more than the total.
func TestOutboundConnectionsAreBoundedPerNamespace(t *testing.T) {
	release := make(chan struct{})
	var slowNow, slowMost atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := slowNow.Add(1)
		defer slowNow.Add(-1)
		for m := slowMost.Load(); n > m && !slowMost.CompareAndSwap(m, n); m = slowMost.Load() {
		}
		select { // a sink that never answers, until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer fast.Close()
	namespaces := map[string]string{
		strings.TrimPrefix(slow.URL, "http://"): "mallory",
		strings.TrimPrefix(fast.URL, "http://"): "bank",
	}
	const total, perNamespace = 6, 4
	o := newOutboundConns(total, perNamespace, func(addr string) (string, bool) { ns, ok := namespaces[addr]; return ns, ok })
	tr := dispatcher.NewTransport(devEgress) // kfn dev's deliveries' transport
	o.bound(tr)
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deliver := func(url string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	var wg sync.WaitGroup
	for range 50 { // maxInFlightMessages 50 to a sink that never answers
		wg.Add(1)
		go func() { defer wg.Done(); _ = deliver(slow.URL) }()
	}
	require.Eventually(t, func() bool { return slowNow.Load() >= perNamespace }, 10*time.Second, 10*time.Millisecond,
		"the slow tenant's deliveries take its namespace's connections")
	assert.Never(t, func() bool { return slowMost.Load() > perNamespace }, 300*time.Millisecond, 10*time.Millisecond,
		"and no more (most at once: %d)", slowMost.Load())

	for range 5 {
		done := make(chan error, 1)
		go func() { done <- deliver(fast.URL) }()
		select {
		case err := <-done:
			require.NoError(t, err, "the other tenant's delivery")
		case <-time.After(5 * time.Second):
			t.Fatal("the other tenant's delivery waited for the slow tenant's connections")
		}
	}
	// Measured before the deliveries end: once they are cancelled, their
	// connections are closed and given back at once, while the server
	// sees each close a moment later, so that a delivery let in then may
	// overlap on the server with one the client already closed.
	assert.LessOrEqual(t, slowMost.Load(), int64(perNamespace))
	cancel()
	wg.Wait()
}

// All namespaces together hold no more than the total.
func TestOutboundConnectionsAreBoundedInTotal(t *testing.T) {
	release := make(chan struct{})
	var now, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	const total, perNamespace = 6, 4
	// Every delivery's address is another namespace's.
	var next atomic.Int64
	o := newOutboundConns(total, perNamespace, func(string) (string, bool) { return string(rune('a' + next.Add(1))), true })
	tr := dispatcher.NewTransport(devEgress)
	o.bound(tr)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	require.Eventually(t, func() bool { return now.Load() >= total }, 10*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return most.Load() > total }, 300*time.Millisecond, 10*time.Millisecond, "most at once: %d", most.Load())
	cancel()
	wg.Wait()
}
