package dev

import (
	"io"
	"strings"
	"sync"

	"github.com/kfn-dev/kfn/local/supervisor"
)

// logBook keeps the last lines each function printed and hands new ones
// to followers, for `kfn logs`. It is an io.Writer of prefixed lines
// ("<namespace>/<name>-<n> | text"); other lines belong to kfn itself.
type logBook struct {
	mu        sync.Mutex
	max       int
	lines     map[string][]string
	followers map[string]map[chan string]struct{}
	split     supervisor.Lines
}

// kfnLog is the key of kfn's own lines.
const kfnLog = "kfn"

func newLogBook(max int) *logBook {
	b := &logBook{max: max, lines: map[string][]string{}, followers: map[string]map[chan string]struct{}{}}
	b.split.Line = b.record
	return b
}

// Write records complete lines.
func (b *logBook) Write(p []byte) (int, error) { return b.split.Write(p) }

// record keeps line and hands it to its key's followers.
func (b *logBook) record(p []byte) error {
	line := string(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	key := lineKey(line)
	kept := append(b.lines[key], line)
	if len(kept) > b.max {
		kept = kept[len(kept)-b.max:]
	}
	b.lines[key] = kept
	for ch := range b.followers[key] {
		select {
		case ch <- line:
		default: // a slow follower misses lines rather than block functions
		}
	}
	return nil
}

// lineKey returns namespace/name for "namespace/name-N | ...", else kfnLog.
func lineKey(line string) string {
	head, _, ok := strings.Cut(line, " | ")
	if !ok || !strings.Contains(head, "/") {
		return kfnLog
	}
	if i := strings.LastIndexByte(head, '-'); i > strings.IndexByte(head, '/') {
		return head[:i]
	}
	return head
}

// Lines returns the kept lines of key.
func (b *logBook) Lines(key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines[key]...)
}

// Follow returns the kept lines of key and a channel of the following
// ones; stop ends the following.
func (b *logBook) Follow(key string) (past []string, next <-chan string, stop func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan string, 256)
	if b.followers[key] == nil {
		b.followers[key] = map[chan string]struct{}{}
	}
	b.followers[key][ch] = struct{}{}
	return append([]string(nil), b.lines[key]...), ch, func() {
		b.mu.Lock()
		delete(b.followers[key], ch)
		b.mu.Unlock()
	}
}

var _ io.Writer = (*logBook)(nil)
