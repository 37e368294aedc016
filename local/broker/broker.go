package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ErrInvalidOption is wrapped by errors about a Config that cannot be used.
var ErrInvalidOption = errors.New("invalid broker option")

// Config says where and how the broker runs.
type Config struct {
	// StoreDir holds JetStream's file store. Required; created if missing.
	StoreDir string
	// Host is the interface to listen on; default 127.0.0.1.
	Host string
	// Port is the client port; 0 picks a free one.
	Port int
	// ReadyTimeout bounds the start; default 10s.
	ReadyTimeout time.Duration
	// MaxStore caps JetStream's file storage in bytes; 0 lets NATS choose.
	MaxStore int64
}

// Broker is a running embedded NATS server with JetStream.
type Broker struct {
	srv *server.Server
}

// Start starts the server and waits until it accepts connections. The
// error wraps ErrInvalidOption for a bad Config.
func Start(cfg Config) (*Broker, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("%w: a store directory is required", ErrInvalidOption)
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d out of range", ErrInvalidOption, cfg.Port)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("create the broker store: %w", err)
	}
	opts := &server.Options{
		ServerName:            "kfn-dev",
		Host:                  cfg.Host,
		Port:                  port,
		JetStream:             true,
		StoreDir:              cfg.StoreDir,
		JetStreamMaxStore:     cfg.MaxStore,
		NoSigs:                true,
		DisableShortFirstPing: true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("configure NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("NATS did not accept connections within %s (store %s)", cfg.ReadyTimeout, cfg.StoreDir)
	}
	return &Broker{srv: srv}, nil
}

// Port is the client port the server listens on.
func (b *Broker) Port() int {
	if a, ok := b.srv.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// URL is the address clients connect to, such as nats://127.0.0.1:4222.
func (b *Broker) URL() string { return b.srv.ClientURL() }

// Connect opens a client connection to the broker that does not go through
// the network stack. Options are added after kfn's own.
func (b *Broker) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.InProcessServer(b.srv), nats.Name("kfn-dev")}, opts...)
	nc, err := nats.Connect(b.URL(), all...)
	if err != nil {
		return nil, fmt.Errorf("connect to the embedded NATS: %w", err)
	}
	return nc, nil
}

// Stop shuts the server down and waits until it has. JetStream state is on
// disk in the store directory. Safe to call more than once.
func (b *Broker) Stop() {
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
}
