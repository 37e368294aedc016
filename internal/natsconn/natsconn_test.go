package natsconn_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/natsfault"
	"github.com/kfn-dev/kfn/test/testport"
)

func startServer(t *testing.T, port int) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(srv.Shutdown)
	return srv
}

// TestConnectWaitsAndReconnects starts with no server (a server that is not
// up yet is no error), then brings one up, kills it and starts another on
// the same port: the connection is there each time, the drop and the
// return are logged, and OnReconnect runs.
func TestConnectWaitsAndReconnects(t *testing.T) {
	port := testport.Port(t)
	var logs logtest.Buffer
	reconnected := make(chan struct{}, 4)
	nc, err := natsconn.Connect("nats://127.0.0.1:"+strconv.Itoa(port), natsconn.Options{
		Name:        "kfn-test",
		Log:         slog.New(slog.NewTextHandler(&logs, nil)),
		OnReconnect: func() { reconnected <- struct{}{} },
	})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	assert.False(t, nc.IsConnected())

	srv := startServer(t, port)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond, "connected once the server is up")
	assert.Equal(t, "kfn-test", nc.Opts.Name)

	srv.Shutdown()
	srv.WaitForShutdown()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	startServer(t, port)
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("no reconnect")
	}
	assert.True(t, nc.IsConnected())
	out := logs.String()
	assert.Contains(t, out, "disconnected from NATS")
	assert.Contains(t, out, "reconnected to NATS")
}

func TestConnectRefusesABadURL(t *testing.T) {
	_, err := natsconn.Connect("http://[::1", natsconn.Options{Name: "kfn-test"})
	require.ErrorContains(t, err, "connect to NATS http://[::1")
}

// TestLostWhenTheServerRefuses closes the connection the way the server
// does after a protocol error (-ERR, then the close): nats.go gives it up
// for good, Lost says why and Live fails. A connection cut without a word
// comes back, and is not lost; one closed by its owner after ctx ends is
// not either.
func TestLostWhenTheServerRefuses(t *testing.T) {
	srv := startServer(t, testport.Port(t))
	proxy := natsfault.Start(t, srv.ClientURL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := natsconn.Connect(proxy.URL(), natsconn.Options{Name: "kfn-test"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	lost := natsconn.Lost(ctx, nc)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond)

	require.Equal(t, 1, proxy.Cut())
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.Stats().Reconnects == 1 }, 10*time.Second, 10*time.Millisecond, "a cut connection comes back")
	assert.Empty(t, lost)
	assert.NoError(t, natsconn.Live(nc))

	require.Equal(t, 1, proxy.Refuse("Maximum Control Line Exceeded"))
	select {
	case err := <-lost:
		require.ErrorIs(t, err, natsconn.ErrLost)
		assert.ErrorContains(t, err, "Maximum Control Line Exceeded")
	case <-time.After(10 * time.Second):
		t.Fatal("the refused connection was not reported lost")
	}
	assert.True(t, nc.IsClosed(), "nats.go does not come back from it")
	assert.ErrorIs(t, natsconn.Live(nc), natsconn.ErrLost)

	nc2, err := natsconn.Connect(srv.ClientURL(), natsconn.Options{Name: "kfn-test"})
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	lost2 := natsconn.Lost(ctx2, nc2)
	cancel2()
	nc2.Close()
	require.Never(t, func() bool { return len(lost2) > 0 }, 200*time.Millisecond, 10*time.Millisecond, "closed by its owner: not lost")
}
