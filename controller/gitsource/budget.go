package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// MaxReferenceListBytes bounds what one Resolve reads from the server: the
// reference list (every branch and tag, with their names), the HTTP
// bodies of the redirects before it, the SSH handshake. go-git decodes the
// whole list into maps, so a server that sends an endless one would fill
// the controller's memory; 8 MiB is more than 100,000 references with
// short names (a repository with tens of thousands of pull requests
// advertises each one's head and merge).
const MaxReferenceListBytes = 8 << 20

// maxResponseHeaderBytes bounds the headers of one HTTP response (net/http's
// default is 10 MiB).
const maxResponseHeaderBytes = 1 << 20

// ErrReferencesTooLarge is wrapped by Resolve when the server sends more
// than MaxReferenceListBytes.
var ErrReferencesTooLarge = errors.New("the reference list is too large")

// readBudget is how many more bytes a resolve may read from its server,
// over all its connections and responses. It is safe for concurrent use
// (SSH reads its connection in a goroutine of its own).
type readBudget struct {
	mu       sync.Mutex
	left     int64
	exceeded bool
}

func newReadBudget(n int64) *readBudget { return &readBudget{left: n} }

// err is the error of a budget spent, nil while it is not.
func (b *readBudget) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.exceeded {
		return nil
	}
	return fmt.Errorf("%w: the server sent more than %d bytes", ErrReferencesTooLarge, int64(MaxReferenceListBytes))
}

// read reads from r into p what the budget has left, and at most one byte
// more to see whether r has more: when it has, read fails with the
// budget's error, then and at every later call, without reading again.
func (b *readBudget) read(r io.Reader, p []byte) (int, error) {
	b.mu.Lock()
	left, exceeded := b.left, b.exceeded
	b.mu.Unlock()
	if exceeded {
		return 0, b.err()
	}
	if int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := r.Read(p)
	b.mu.Lock()
	if int64(n) > b.left {
		n, b.left, b.exceeded = int(b.left), 0, true
	} else {
		b.left -= int64(n)
	}
	exceeded = b.exceeded
	b.mu.Unlock()
	if exceeded {
		return n, b.err()
	}
	return n, err
}

// budgetKey is the context key of a Resolve's read budget.
type budgetKey struct{}

// budgetOf is the read budget ctx carries, nil when none (a Fetch).
func budgetOf(ctx context.Context) *readBudget {
	b, _ := ctx.Value(budgetKey{}).(*readBudget)
	return b
}

// budgetBody is an HTTP response body whose reads spend a budget.
type budgetBody struct {
	io.ReadCloser
	b *readBudget
}

func (r budgetBody) Read(p []byte) (int, error) { return r.b.read(r.ReadCloser, p) }

// budgetConn is a connection whose reads spend a budget.
type budgetConn struct {
	net.Conn
	b *readBudget
}

func (c budgetConn) Read(p []byte) (int, error) { return c.b.read(c.Conn, p) }
