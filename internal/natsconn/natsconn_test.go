package natsconn_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/natsfault"
	"github.com/kfn-dev/kfn/test/natstest"
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

// TestConnectWithCredentials connects to a server that has users: the
// password comes from the file, which is read again before a reconnect
// (a rotated Secret takes effect); a server that refuses the password
// twice closes the connection for good, which Lost reports.
func TestConnectWithCredentials(t *testing.T) {
	port := testport.Port(t)
	users := func(password string) *server.Options {
		return &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
			Users: []*server.User{{Username: "kfn-test", Password: password}}}
	}
	start := func(o *server.Options) *server.Server {
		srv, err := server.NewServer(o)
		require.NoError(t, err)
		srv.Start()
		require.True(t, srv.ReadyForConnections(10*time.Second))
		t.Cleanup(srv.Shutdown)
		return srv
	}
	srv := start(users("first-password"))
	file := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(file, []byte("first-password\n"), 0o600))
	creds := natsconn.Credentials{User: "kfn-test", PasswordFile: file}
	require.NoError(t, creds.Validate())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := natsconn.Connect(srv.ClientURL(), natsconn.Options{Name: "kfn-test", Credentials: creds})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	lost := natsconn.Lost(ctx, nc)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond, "connected with the file's password")

	// The Secret is rotated, and the server restarts with the new password.
	require.NoError(t, os.WriteFile(file, []byte("second-password"), 0o600))
	srv.Shutdown()
	srv.WaitForShutdown()
	srv = start(users("second-password"))
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.Stats().Reconnects == 1 }, 10*time.Second, 10*time.Millisecond,
		"reconnected with the new password")

	// A server that does not know the password.
	srv.Shutdown()
	srv.WaitForShutdown()
	start(users("third-password"))
	select {
	case err := <-lost:
		require.ErrorIs(t, err, natsconn.ErrLost)
		assert.ErrorIs(t, err, nats.ErrAuthorization)
	case <-time.After(20 * time.Second):
		t.Fatal("a refused password did not close the connection")
	}
}

// TestCredentialsValidate: flags that do not go together are refused by
// Validate, files that cannot be used by Connect.
func TestCredentialsValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(file, []byte("secret"), 0o600))
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	assert.NoError(t, natsconn.Credentials{}.Validate(), "anonymous")
	assert.NoError(t, natsconn.Credentials{User: "u", PasswordFile: file, CAFile: file}.Validate())
	for name, c := range map[string]natsconn.Credentials{
		"a user without a password":     {User: "u"},
		"a password without a user":     {PasswordFile: file},
		"a user and a credentials file": {User: "u", PasswordFile: file, CredsFile: file},
	} {
		assert.ErrorIs(t, c.Validate(), natsconn.ErrInvalidCredentials, name)
	}
	for name, c := range map[string]natsconn.Credentials{
		"a missing password file": {User: "u", PasswordFile: file + ".missing"},
		"an empty password":       {User: "u", PasswordFile: empty},
		"a missing CA":            {CAFile: file + ".missing"},
	} {
		_, err := natsconn.Connect("nats://127.0.0.1:1", natsconn.Options{Credentials: c})
		assert.Error(t, err, "Connect refuses %s", name)
	}
}

// TestSilentServerIsLeft silences the connection to a server (it stays
// open, nothing more arrives either way: a node whose power was cut): the
// connection's own pings find it out and it reconnects, here to the same
// server through a new connection, as it would to another of a cluster.
// nats.go's default (a ping every 2 minutes) would hold it for minutes.
func TestSilentServerIsLeft(t *testing.T) {
	srv := startServer(t, testport.Port(t))
	proxy := natsfault.Start(t, srv.ClientURL())
	var logs logtest.Buffer
	reconnected := make(chan struct{}, 4)
	nc, err := natsconn.Connect(proxy.URL(), natsconn.Options{
		Name:         "kfn-test",
		Log:          slog.New(slog.NewTextHandler(&logs, nil)),
		OnReconnect:  func() { reconnected <- struct{}{} },
		PingInterval: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond)

	require.Equal(t, 1, proxy.Silence())
	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("still on the silent connection")
	}
	assert.Contains(t, logs.String(), "disconnected from NATS")
	sub, err := nc.SubscribeSync("kfn.test")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("kfn.test", []byte("back")))
	msg, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err, "the new connection carries messages")
	assert.Equal(t, "back", string(msg.Data))
}

// TestConnectPingsByDefault: without Options.PingInterval a connection
// pings every DefaultPingInterval and gives up after MaxPingsOutstanding.
func TestConnectPingsByDefault(t *testing.T) {
	nc, err := natsconn.Connect("nats://127.0.0.1:"+strconv.Itoa(testport.Port(t)), natsconn.Options{Name: "kfn-test"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	assert.Equal(t, natsconn.DefaultPingInterval, nc.Opts.PingInterval)
	assert.Equal(t, natsconn.MaxPingsOutstanding, nc.Opts.MaxPingsOut)
	assert.Less(t, natsconn.DefaultPingInterval*natsconn.MaxPingsOutstanding, 30*time.Second, "a silent server is left well within a minute")
}

// TestConnectNamesItsInboxes: a connection's inboxes are under
// _INBOX.<name>, which the chart's NATS lets only that component's user
// subscribe to; a name that is not one token of a subject is refused.
func TestConnectNamesItsInboxes(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := natsconn.Connect(srv.URL(), natsconn.Options{Name: "kfn-test"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	assert.Equal(t, "_INBOX.kfn-test", natsconn.InboxPrefix("kfn-test"))
	assert.True(t, strings.HasPrefix(nc.NewInbox(), "_INBOX.kfn-test."), nc.NewInbox())
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond)
	_, err = nc.Request("$JS.API.INFO", nil, 10*time.Second)
	require.NoError(t, err, "a request's answer comes on the named inbox")

	for _, name := range []string{"kfn.test", "kfn-*", "kfn->", "kfn test"} {
		_, err := natsconn.Connect(srv.URL(), natsconn.Options{Name: name})
		assert.ErrorIs(t, err, natsconn.ErrInvalidName, name)
	}
}

// TestUntilLost returns nil when its context ends first, and ErrLost once
// the connection is closed for good.
func TestUntilLost(t *testing.T) {
	srv := startServer(t, testport.Port(t))
	nc, err := natsconn.Connect(srv.ClientURL(), natsconn.Options{Name: "kfn-test"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, natsconn.UntilLost(ctx, nc))

	nc.Close()
	err = natsconn.UntilLost(context.Background(), nc)
	assert.ErrorIs(t, err, natsconn.ErrLost)
}
