package connlimit_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/connlimit"
)

// openConns is a server's own ConnState hook counting its connections
// open at once and the most it saw; Bound must keep calling it.
type openConns struct {
	mu         sync.Mutex
	open, most int
}

func (o *openConns) hook(_ net.Conn, s http.ConnState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch s {
	case http.StateNew:
		o.open++
		o.most = max(o.most, o.open)
	case http.StateClosed, http.StateHijacked:
		o.open--
	}
}

func (o *openConns) mostOpen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most
}

// TestIdleConnectionsMakeRoomForNewOnes: over plain HTTP and over TLS (the
// listener Bound returns, wrapped), six clients that each make a request
// and keep their connection idle do not keep a seventh out at a bound of
// two (one address may hold both): idle ones are closed for it, and never
// more than two are open. The server's own ConnState hook still sees every
// change.
func TestIdleConnectionsMakeRoomForNewOnes(t *testing.T) {
	for _, tls := range []bool{false, true} {
		name := "plain"
		if tls {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("ok"))
			}))
			counts := &openConns{}
			srv.Config.ConnState = counts.hook
			srv.Listener = connlimit.Bound(srv.Config, srv.Listener, 2, connlimit.PerSource(2))
			if tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			get := func(c *http.Client) error {
				resp, err := c.Get(srv.URL)
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body) // read whole: the connection is kept, idle
				return resp.Body.Close()
			}
			for range 6 { // each keeps its connection idle: a transport of its own
				tr := srv.Client().Transport.(*http.Transport).Clone()
				t.Cleanup(tr.CloseIdleConnections)
				require.NoError(t, get(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
			}
			victim := srv.Client()
			victim.Timeout = 10 * time.Second
			require.NoError(t, get(victim), "served while others hold idle connections")
			assert.LessOrEqual(t, counts.mostOpen(), 2, "never more open than the bound")
			assert.Positive(t, counts.mostOpen(), "the server's own hook was called")
		})
	}
}

// TestTheDefaultIsAShareOfTheFileLimit: at least 16, at most 4,096.
func TestTheDefaultIsAShareOfTheFileLimit(t *testing.T) {
	n := connlimit.DefaultMost()
	assert.GreaterOrEqual(t, n, 16)
	assert.LessOrEqual(t, n, 4096)
}

// TestTheDefaultShareIsAnEighth: one address holds an eighth of a
// listener's connections by default, at least one.
func TestTheDefaultShareIsAnEighth(t *testing.T) {
	assert.Equal(t, 512, connlimit.DefaultPerSource(4096))
	assert.Equal(t, 2, connlimit.DefaultPerSource(16))
	assert.Equal(t, 1, connlimit.DefaultPerSource(4), "at least one")
}
