package tail

import (
	"bytes"
	"sync"
)

// Buffer keeps the last bytes written to it, up to the size given to [New].
// It is safe for concurrent use; its writes never fail.
type Buffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// New returns a Buffer that keeps the last size bytes (at least 1).
func New(size int) *Buffer {
	return &Buffer{max: max(size, 1)}
}

// Write keeps the end of p and of what came before; it always returns
// len(p), nil. It copies only when the buffer grows past twice its size.
func (b *Buffer) Write(p []byte) (int, error) {
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
func (b *Buffer) String() string {
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
