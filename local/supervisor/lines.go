package supervisor

import (
	"bytes"
	"io"
	"sync"
)

// Lines is an io.Writer of lines: it hands each complete line written to
// it, without its newline, to Line, in order and one at a time, so that
// lines written in pieces or several at once come out whole. A line
// longer than Max (when Max > 0) that has no newline yet is handed on as
// it is. Write returns Line's first error (the lines after it stay
// buffered).
type Lines struct {
	Line func(line []byte) error
	Max  int

	mu  sync.Mutex
	buf []byte
}

func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		l.buf = l.buf[i+1:]
		if err := l.Line(line); err != nil {
			return len(p), err
		}
	}
	if l.Max > 0 && len(l.buf) > l.Max {
		line := l.buf
		l.buf = l.buf[len(l.buf):]
		if err := l.Line(line); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// maxLine is the longest line without a newline a process's output keeps
// before it is written as it is.
const maxLine = 64 * 1024

// prefixedLines writes each complete line written to it to out in one
// Write, after prefix, so that the lines of several processes interleave
// whole.
func prefixedLines(out io.Writer, prefix string) *Lines {
	return &Lines{Max: maxLine, Line: func(line []byte) error {
		b := make([]byte, 0, len(prefix)+len(line)+1)
		b = append(append(append(b, prefix...), line...), '\n')
		_, err := out.Write(b)
		return err
	}}
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
