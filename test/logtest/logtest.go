package logtest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer collects log output; it is safe for concurrent use, as a
// program's logger and the test reading it need.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Line is one parsed log line.
type Line map[string]any

// String returns the value of key as a string, "" when absent or not a
// string.
func (l Line) String(key string) string {
	s, _ := l[key].(string)
	return s
}

// levels are the only level names of the layout.
var levels = []string{"DEBUG", "INFO", "WARN", "ERROR"}

// CheckLayout fails t for every line of out that is not in the layout: a
// JSON object with an RFC 3339 time, one of the four levels, a msg, and a
// component among components (any component when none are given). It
// fails t when out has no line at all, and returns the parsed lines.
func CheckLayout(t testing.TB, out string, components ...string) []Line {
	t.Helper()
	var lines []Line
	for _, raw := range strings.Split(out, "\n") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		var l Line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Errorf("log line is not JSON: %v: %s", err, raw)
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, l.String("time")); err != nil {
			t.Errorf("log line without an RFC 3339 time: %s", raw)
		}
		if !slices.Contains(levels, l.String("level")) {
			t.Errorf("log line with level %q, not one of %v: %s", l["level"], levels, raw)
		}
		if l.String("msg") == "" {
			t.Errorf("log line without msg: %s", raw)
		}
		c := l.String("component")
		if c == "" || (len(components) > 0 && !slices.Contains(components, c)) {
			t.Errorf("log line with component %q, want one of %v: %s", c, components, raw)
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		t.Error("no log lines")
	}
	return lines
}
