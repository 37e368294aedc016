package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// harness is what a Server needs of its test: testing.TB's helpers, or a
// program's (programHarness).
type harness interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(f func())
	TempDir() string
}

var _ harness = testing.TB(nil)

// Server is an embedded NATS server with JetStream.
type Server struct {
	t    harness
	opts server.Options
	srv  *server.Server
}

// Start starts a server on a random loopback port with a store directory
// under t.TempDir() and shuts it down when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	s.start()
	// Restarts keep the port, so clients reconnect to the same URL.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Shutdown)
	return s
}

// readyWithin bounds how long a server may take to accept clients.
const readyWithin = time.Minute

func (s *Server) start() {
	s.t.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats server: %v", err)
	}
	srv.Start()
	// A bound, not a wait: a server is ready in milliseconds on a quiet
	// machine, but one of a 3-server cluster took over 10 s under the
	// load of the whole go test ./... on two cores.
	if !srv.ReadyForConnections(readyWithin) {
		srv.Shutdown()
		s.t.Fatalf("nats server not ready within %s", readyWithin)
	}
	s.srv = srv
}

// URL is the client URL of the server.
func (s *Server) URL() string { return s.srv.ClientURL() }

// StoreDir is the JetStream store directory.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Shutdown stops the server and waits until it stopped. It is idempotent.
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
}

// Restart stops the server and starts it again on the same port with the
// same store: a NATS restart.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}

// Wipe stops the server and starts an empty one on the same port: the loss
// of NATS and everything it stored.
func (s *Server) Wipe() {
	s.t.Helper()
	s.Shutdown()
	s.opts.StoreDir = s.t.TempDir()
	s.start()
}

// Connect returns a client connection that reconnects forever, closed when
// the test ends.
func (s *Server) Connect() *nats.Conn {
	s.t.Helper()
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		s.t.Fatalf("connect to nats: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection.
func (s *Server) JetStream() jetstream.JetStream {
	s.t.Helper()
	js, err := jetstream.New(s.Connect())
	if err != nil {
		s.t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Varz is the server's general statistics (its monitoring endpoint's
// /varz): messages and bytes in and out among them.
func (s *Server) Varz() (*server.Varz, error) { return s.srv.Varz(nil) }

// Name is the server's name in its cluster.
func (s *Server) Name() string { return s.srv.Name() }
