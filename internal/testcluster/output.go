package testcluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// tailBuffer keeps the last max bytes written to it, so that the output of a
// process that failed to start can go into the error without holding all the
// logs of a long test run in memory. It is safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

// String returns up to max of the last bytes written. When it had to cut,
// it starts after the first line break it can, so no line is shown in part.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.buf
	if len(tail) > b.max {
		tail = tail[len(tail)-b.max:]
		if i := bytes.IndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			tail = tail[i+1:]
		}
	}
	return string(tail)
}

// output keeps the last output of etcd and of the API server.
type output struct {
	etcd, apiServer tailBuffer
}

// String quotes the output for an error message, or is empty if there is none.
func (o *output) String() string {
	return quote("etcd", &o.etcd) + quote("kube-apiserver", &o.apiServer)
}

func quote(name string, tail *tailBuffer) string {
	out := strings.TrimSpace(tail.String())
	if out == "" {
		return ""
	}
	return fmt.Sprintf("\n--- last output of %s ---\n%s", name, out)
}

// outputWriter sends a process's output to tail, and also to the test's
// own output when KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true asks for it,
// as envtest would.
func outputWriter(tail *tailBuffer, attached io.Writer) io.Writer {
	if os.Getenv("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT") == "true" {
		return io.MultiWriter(tail, attached)
	}
	return tail
}
