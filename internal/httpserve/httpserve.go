package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultGrace is how long Until lets the requests in progress finish
// when its context ends.
const DefaultGrace = 5 * time.Second

// Until serves srv on ln until ctx ends, then shuts it down, letting the
// requests in progress finish for at most grace (DefaultGrace when 0),
// and returns nil once it is down (the requests still in progress then
// are cut off). A failure to serve before that is
// returned, named by name.
func Until(ctx context.Context, srv *http.Server, ln net.Listener, name string, grace time.Duration) error {
	if grace <= 0 {
		grace = DefaultGrace
	}
	stopped := make(chan struct{})
	shut := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			shut <- nil
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		shut <- srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	close(stopped)
	serr := <-shut
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		return fmt.Errorf("%s: shut down: %w", name, serr)
	}
	return nil
}
