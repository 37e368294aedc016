package depcache

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// downloads are the downloads under way on one server, bounded in all
// (MaxDownloads) and by namespace (MaxNamespaceDownloads): each holds a
// JetStream consumer whose chunks NATS sends ahead of its client, so the
// bounds bound the memory that slow or stalled clients make the server
// hold. It is safe for concurrent use.
type downloads struct {
	max, perNamespace int

	mu          sync.Mutex
	total       int
	byNamespace map[string]int
}

func newDownloads(total, perNamespace int) *downloads {
	return &downloads{max: total, perNamespace: perNamespace, byNamespace: map[string]int{}}
}

// claim takes a slot for a download of namespace, to be given back with
// release; or returns why it cannot, naming the bound reached: the
// namespace's, or the server's.
func (d *downloads) claim(namespace string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.byNamespace[namespace]; n >= d.perNamespace {
		return fmt.Sprintf("namespace %s has %d downloads under way, as many as it may at once", namespace, n)
	}
	if d.total >= d.max {
		return fmt.Sprintf("too many downloads at once (%d)", d.max)
	}
	d.total++
	d.byNamespace[namespace]++
	return ""
}

// release gives back a slot of namespace that claim took.
func (d *downloads) release(namespace string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total--
	if d.byNamespace[namespace]--; d.byNamespace[namespace] <= 0 {
		delete(d.byNamespace, namespace)
	}
}

// Errors of send.
var (
	// errWrite is wrapped by the errors of writing to the client.
	errWrite = errors.New("write to the client")
	// errStalled is the error of a download whose client took nothing
	// for a write's timeout, on a writer without deadlines.
	errStalled = errors.New("the client read nothing for the write timeout")
)

// sendBuffer is what one write of a download sends at most.
const sendBuffer = 32 << 10

// send writes body to w, each write within DownloadWriteTimeout and all
// before end, and returns the bytes written: a client that takes nothing
// for that long (or is not done by end) fails the write, and so the
// download, with an error for which os.ErrDeadlineExceeded is true (and
// errWrite, as for any error of a write). The
// server resets the deadline once the response is flushed (net/http, for
// a connection kept alive). On a writer that takes no deadlines (a
// middleware's without Unwrap) such a write closes body instead, which
// releases its consumer and the chunks NATS sent ahead, and fails with
// errStalled once the write returns (when the server or the client ends
// the connection: until then the download keeps its slot).
func (c *Cache) send(w http.ResponseWriter, body io.ReadCloser, end time.Time) (int64, error) {
	rc := http.NewResponseController(w)
	deadlines := true
	stalled := time.AfterFunc(time.Hour, func() { _ = body.Close() })
	stalled.Stop()
	defer stalled.Stop()
	buf := make([]byte, sendBuffer)
	var sent int64
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			timeout := min(c.cfg.DownloadWriteTimeout, time.Until(end))
			if deadlines && rc.SetWriteDeadline(time.Now().Add(timeout)) != nil {
				deadlines = false
			}
			if !deadlines {
				stalled.Reset(timeout)
			}
			m, err := w.Write(buf[:n])
			sent += int64(m)
			if !deadlines && !stalled.Stop() {
				return sent, errStalled
			}
			if err != nil {
				return sent, fmt.Errorf("%w: %w", errWrite, err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return sent, nil
		}
		if rerr != nil {
			return sent, fmt.Errorf("read the object: %w", rerr)
		}
	}
}
