package depcache_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/testport"
)

// nobody knows no caller: Prepare asks no one.
type nobody struct{}

func (nobody) SenderNamespace(*http.Request) (string, error) { return "", nil }

func (nobody) WriterNamespace(context.Context, string, string) (string, error) {
	return "", depcache.ErrNotAWriter
}

// TestPrepareMakesTheBucketBeforeAnyRequest: the event bridge makes the
// bucket as it starts, not at the first pod's request (which, on a
// cluster just formed, failed 503 when making a replicated bucket
// outlasted it); a NATS without JetStream yet (a cluster with no meta
// leader answers likewise) is retried until the bucket exists. Fails when
// Prepare makes nothing, or gives up after its first failure.
func TestPrepareMakesTheBucketBeforeAnyRequest(t *testing.T) {
	port := testport.Port(t)
	start := func(jetStream bool) *natsserver.Server {
		srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: jetStream, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
		require.NoError(t, err)
		srv.Start()
		t.Cleanup(srv.Shutdown)
		require.True(t, srv.ReadyForConnections(10*time.Second))
		return srv
	}
	without := start(false)
	nc, err := nats.Connect(without.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	sc := stream.DefaultConfig()
	sc.DependencyMaxBytes = 16 << 20
	var logs logtest.Buffer
	c, err := depcache.New(js, jsstream.DependencyBucketConfig(sc), nobody{}, nobody{}, depcache.DefaultConfig(), depcache.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Prepare(ctx, 20*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "making the dependency cache's bucket failed") }, 10*time.Second, 10*time.Millisecond)

	// JetStream comes: the same address, a server with it.
	without.Shutdown()
	start(true)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Prepare did not make the bucket")
	}
	_, err = js.ObjectStore(context.Background(), jsstream.DependencyBucketConfig(sc).Bucket)
	require.NoError(t, err, "the bucket exists before any request")
}
