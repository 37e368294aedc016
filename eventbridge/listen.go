package eventbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/soheilhy/cmux"
	"golang.org/x/sync/errgroup"

	"github.com/kfn-dev/kfn/internal/connlimit"
)

// listeners serve Run's handlers, each on an address of its own, in g,
// and shut them down together.
type listeners struct {
	g   *errgroup.Group
	log *slog.Logger
	// maxConns bounds each listener's connections (Process.MaxConnections),
	// perSource those of one source address (MaxConnectionsPerSource).
	maxConns, perSource int
	servers             []*http.Server
}

// listen serves h on addr until ctx ends: plain HTTP without tlsConfig,
// TLS with it, and both on the one port with plainToo (told apart by the
// first bytes a client sends: a TLS handshake's or not). An empty addr or
// a nil h serves nothing. One source address holds at most l.perSource
// connections, or l.maxConns with proxied (whose callers come through a
// proxy: its address is theirs).
func (l *listeners) listen(ctx context.Context, name, addr string, h http.Handler, tlsConfig *tls.Config, plainToo, proxied bool) {
	if addr == "" || h == nil {
		return
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
	l.servers = append(l.servers, srv)
	l.g.Go(func() error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: listen on %s: %w", name, addr, err)
		}
		perSource := l.perSource
		if proxied {
			perSource = l.maxConns
		}
		ln = connlimit.Bound(srv, ln, l.maxConns, connlimit.PerSource(perSource)) // before TLS and the mux: every connection counts
		l.log.Info("serving", "server", name, "address", ln.Addr().String(), "tls", tlsConfig != nil, "plain", tlsConfig == nil || plainToo)
		switch {
		case tlsConfig == nil:
			return serveOn(ctx, name, srv, ln)
		case !plainToo:
			return serveOn(ctx, name, srv, tls.NewListener(ln, tlsConfig))
		}
		return l.serveBoth(ctx, name, srv, ln, tlsConfig)
	})
}

// serveBoth serves srv on ln over TLS and plain HTTP, by the first bytes
// of each connection.
func (l *listeners) serveBoth(ctx context.Context, name string, srv *http.Server, ln net.Listener, tlsConfig *tls.Config) error {
	m := cmux.New(ln)
	m.SetReadTimeout(readHeaderTimeout)
	tlsLn, plainLn := m.Match(cmux.TLS()), m.Match(cmux.Any())
	l.g.Go(func() error { return serveOn(ctx, name, srv, tls.NewListener(tlsLn, tlsConfig)) })
	l.g.Go(func() error { <-ctx.Done(); _ = ln.Close(); return nil }) // the servers close only their own listeners
	l.g.Go(func() error {
		if err := m.Serve(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
	return serveOn(ctx, name, srv, plainLn)
}

// serveOn serves srv on ln until it is shut down.
func serveOn(ctx context.Context, name string, srv *http.Server, ln net.Listener) error {
	// A mux's listeners may end before Shutdown marks the server closed:
	// an error once ctx ended is the shutdown.
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// shutdown shuts every server down gracefully, within shutdownTimeout.
func (l *listeners) shutdown(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	for _, s := range l.servers {
		_ = s.Shutdown(sctx)
	}
}
