package httpserve_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/httpserve"
)

// TestUntilServesUntilTheContextEnds: requests are answered while the
// context lives, a request in progress when it ends finishes, and Until
// returns nil once the server is down; a listener that fails is an error
// named after the server.
func TestUntilServesUntilTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	inside, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inside)
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpserve.Until(ctx, srv, ln, "test", time.Minute) }()
	url := "http://" + ln.Addr().String()
	resp, err := http.Get(url + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	slow := make(chan int, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			slow <- 0
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	<-inside
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Until returned (%v) with a request in progress", err)
	case <-time.After(50 * time.Millisecond): // a bound for a negative: nothing to await
	}
	close(release)
	assert.Equal(t, http.StatusOK, <-slow, "the request in progress finished")
	require.NoError(t, <-done)

	ln.Close()
	err = httpserve.Until(context.Background(), &http.Server{}, ln, "closed", 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "closed: ")
}
