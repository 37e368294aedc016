package supervisor

import (
	"bytes"
	"io"
	"sync"
)

// lineWriter writes each complete line it receives to out in one Write,
// with a prefix, so lines of several processes interleave whole.
type lineWriter struct {
	mu     sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := make([]byte, 0, len(w.prefix)+i+1)
		line = append(line, w.prefix...)
		line = append(line, w.buf[:i+1]...)
		w.buf = w.buf[i+1:]
		if _, err := w.out.Write(line); err != nil {
			return len(p), err
		}
	}
	if len(w.buf) > 64*1024 { // a very long line without newline: flush it
		line := append([]byte(w.prefix), w.buf...)
		w.buf = w.buf[:0]
		if _, err := w.out.Write(append(line, '\n')); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// SyncWriter serializes writes to an io.Writer shared by many processes.
type SyncWriter struct {
	mu  sync.Mutex
	out io.Writer
}

// NewSyncWriter wraps out.
func NewSyncWriter(out io.Writer) *SyncWriter { return &SyncWriter{out: out} }

// Write writes p to the wrapped writer while holding a lock.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}
