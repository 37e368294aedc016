package depcache

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// claimDownload takes a slot for a download of namespace (give it back
// with c.downloads.Leave), or returns why it cannot, naming the bound
// reached: the namespace's (MaxNamespaceDownloads), or the server's
// (MaxDownloads).
func (c *Cache) claimDownload(namespace string) string {
	if c.downloads.TryEnter(namespace) {
		return ""
	}
	if held, _ := c.downloads.Held(namespace); held >= c.downloads.PerFlow() {
		return fmt.Sprintf("namespace %s has %d downloads under way, as many as it may at once", namespace, held)
	}
	return fmt.Sprintf("too many downloads at once (%d)", c.downloads.Total())
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
