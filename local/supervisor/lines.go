package supervisor

import (
	"bytes"
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

// flush hands on what was written after the last newline, as a line:
// the end of a process's output that has no newline.
func (l *Lines) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return nil
	}
	line := l.buf
	l.buf = nil
	return l.Line(line)
}

// maxLine is the longest line without a newline a process's output keeps
// before it is written as it is.
const maxLine = 64 * 1024
