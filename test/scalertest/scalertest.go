package scalertest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/internal/jsstream"
)

// NATS is an embedded NATS server with JetStream and kfn's streams.
type NATS struct {
	// Server is the running server.
	Server *server.Server
	// Conn is a client connection, closed when the test ends.
	Conn *nats.Conn
	// JS is JetStream on Conn.
	JS jetstream.JetStream
	// Streams is the stream configuration in use (stream.DefaultConfig
	// with memory storage).
	Streams stream.Config
}

// StartNATS starts a server on a random loopback port, with its store under
// tb.TempDir(), creates kfn's streams, and shuts it all down when the test
// ends. It fails tb if any of this fails.
func StartNATS(tb testing.TB) *NATS {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  tb.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		tb.Fatalf("nats server: %v", err)
	}
	srv.Start()
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats server not ready within 10s")
	}
	n := &NATS{Server: srv, Conn: Connect(tb, srv.ClientURL())}
	if n.JS, err = jetstream.New(n.Conn); err != nil {
		tb.Fatalf("jetstream: %v", err)
	}
	n.Streams = stream.DefaultConfig()
	n.Streams.Storage = stream.StorageMemory
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jsstream.Ensure(ctx, n.JS, n.Streams); err != nil {
		tb.Fatalf("create streams: %v", err)
	}
	return n
}

// Connect returns a connection to url that reconnects forever, closed when
// the test ends.
func Connect(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		tb.Fatalf("connect to nats: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// CreateConsumer creates the Subscription's durable consumer in the event
// stream, as the event bridge does, and returns it.
func (n *NATS) CreateConsumer(tb testing.TB, sub *eventingv1alpha2.Subscription) jetstream.Consumer {
	tb.Helper()
	cfg, err := jsstream.ConsumerConfig(sub, stream.ConsumerSettings{})
	if err != nil {
		tb.Fatalf("consumer config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := jsstream.EnsureConsumer(ctx, n.JS, n.Streams.EventStream, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Publish stores one event with the given source and type in the event
// stream, as the publisher does, and fails tb if JetStream does not
// acknowledge it.
func (n *NATS) Publish(tb testing.TB, source, eventType, id string) {
	tb.Helper()
	subject, err := eventingv1alpha2.EventSubject(source, eventType)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.JS.Publish(ctx, subject, []byte(`{}`), jetstream.WithMsgID(source+"/"+id)); err != nil {
		tb.Fatalf("publish %s: %v", subject, err)
	}
}

// AwaitPending waits up to 10 s until the event stream's consumers count
// want events pending in all, and fails tb if they do not. JetStream
// acknowledges a publish before it tells the stream's consumers (an
// in-process queue), so a consumer's NumPending can trail an acknowledged
// publish for a moment; a test that asserts on a single read waits here
// first.
func (n *NATS) AwaitPending(tb testing.TB, want uint64) {
	tb.Helper()
	var got uint64
	var err error
	if !assert.Eventually(tb, func() bool {
		got, err = n.pending()
		return err == nil && got == want
	}, 10*time.Second, 10*time.Millisecond) {
		tb.Fatalf("consumers of %s: want %d pending, last %d (%v)", n.Streams.EventStream, want, got, err)
	}
}

// pending sums NumPending over the event stream's consumers.
func (n *NATS) pending() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := n.JS.Stream(ctx, n.Streams.EventStream)
	if err != nil {
		return 0, err
	}
	var sum uint64
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		sum += info.NumPending
	}
	return sum, lister.Err()
}

// Subscription returns a standard-matching Subscription in namespace ns
// whose sink is the Function fn's Service, for events of eventType from
// source.
func Subscription(ns, name, fn, source, eventType string) *eventingv1alpha2.Subscription {
	sub := &eventingv1alpha2.Subscription{}
	sub.Namespace, sub.Name = ns, name
	sub.Spec.Sink = "http://" + fn + "." + ns + ".svc.cluster.local"
	sub.Spec.Source = source
	sub.Spec.Types = []string{eventType}
	return sub
}
