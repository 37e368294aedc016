package dev

import (
	"io"
	"strings"
	"sync"

	"github.com/kfn-dev/kfn/local/supervisor"
)

// Bounds of what a logBook keeps. A function's line can be about 96 KiB
// (a 64 KiB line without its newline yet, and the 32 KiB read that
// carried it on), so a bound in lines alone does not bound memory.
const (
	// logBytesPerKey bounds the bytes kept of one function (and of kfn's
	// own lines); its oldest lines go first.
	logBytesPerKey = 1 << 20
	// logBytesTotal bounds the bytes kept of all functions together; the
	// function that has the most gives up its oldest lines first.
	logBytesTotal = 64 << 20
	// logLineOverhead is what a kept line costs besides its bytes (its
	// string header), so that many empty lines count too.
	logLineOverhead = 16
)

// logBook keeps the last lines each function printed and hands new ones
// to followers, for `kfn logs`. It is an io.Writer of prefixed lines
// ("<namespace>/<name>-<n> | text"); other lines belong to kfn itself.
// It keeps at most max lines and logBytesPerKey bytes of each function,
// and logBytesTotal bytes in all.
type logBook struct {
	mu        sync.Mutex
	max       int // lines kept of a key
	maxBytes  int // bytes kept of a key
	maxTotal  int // bytes kept of all keys
	lines     map[string][]string
	bytes     map[string]int // cost of lines[key]
	total     int            // cost of all lines
	followers map[string]map[chan string]struct{}
	split     supervisor.Lines
}

// kfnLog is the key of kfn's own lines.
const kfnLog = "kfn"

func newLogBook(max int) *logBook {
	b := &logBook{
		max: max, maxBytes: logBytesPerKey, maxTotal: logBytesTotal,
		lines: map[string][]string{}, bytes: map[string]int{},
		followers: map[string]map[chan string]struct{}{},
	}
	b.split.Line = b.record
	b.split.Max = logBytesPerKey // a line without a newline is not held beyond it
	return b
}

// Write records complete lines.
func (b *logBook) Write(p []byte) (int, error) { return b.split.Write(p) }

// record keeps line and hands it to its key's followers.
func (b *logBook) record(p []byte) error {
	if limit := b.maxBytes - logLineOverhead; len(p) > limit {
		p = p[:limit] // so that any line fits its key's bound
	}
	line := string(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	key := lineKey(line)
	b.lines[key] = append(b.lines[key], line)
	b.bytes[key] += cost(line)
	b.total += cost(line)
	for len(b.lines[key]) > b.max || b.bytes[key] > b.maxBytes {
		b.dropOldest(key)
	}
	for b.total > b.maxTotal {
		b.dropOldest(b.largest(key))
	}
	for ch := range b.followers[key] {
		select {
		case ch <- line:
		default: // a slow follower misses lines rather than block functions
		}
	}
	return nil
}

// cost is what keeping line counts against the bounds.
func cost(line string) int { return len(line) + logLineOverhead }

// dropOldest forgets the oldest line of key, and key once it has none.
// The caller holds b.mu.
func (b *logBook) dropOldest(key string) {
	kept := b.lines[key]
	if len(kept) == 0 {
		return
	}
	c := cost(kept[0])
	kept[0] = "" // the array's slot must not hold the line on
	kept = kept[1:]
	b.bytes[key] -= c
	b.total -= c
	if len(kept) == 0 {
		delete(b.lines, key)
		delete(b.bytes, key)
		return
	}
	b.lines[key] = kept
}

// largest returns the key that keeps the most bytes; of keys that keep as
// many, one other than recent (whose line is the newest). The caller
// holds b.mu.
func (b *logBook) largest(recent string) string {
	best, most := recent, b.bytes[recent]
	for key, n := range b.bytes {
		if n > most || (n == most && best == recent) {
			best, most = key, n
		}
	}
	return best
}

// lineKey returns namespace/name for a process's "namespace/name-N | ..."
// and kfn's "namespace/name | ..." about the function, else kfnLog. (kfn's
// line about a function whose name ends in a dash and digits goes to the
// name without them.)
func lineKey(line string) string {
	head, _, ok := strings.Cut(line, " | ")
	if !ok || !strings.Contains(head, "/") {
		return kfnLog
	}
	if i := strings.LastIndexByte(head, '-'); i > strings.IndexByte(head, '/') && digits(head[i+1:]) {
		return head[:i]
	}
	return head
}

// digits reports whether s is one or more decimal digits.
func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Lines returns the kept lines of key.
func (b *logBook) Lines(key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines[key]...)
}

// Forget drops the kept lines of key (a function that was deleted or
// renamed), so they no longer count against the bounds. Its followers
// stay, and lines it prints later are kept anew.
func (b *logBook) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= b.bytes[key]
	delete(b.lines, key)
	delete(b.bytes, key)
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
		if len(b.followers[key]) == 0 {
			delete(b.followers, key)
		}
		b.mu.Unlock()
	}
}

var _ io.Writer = (*logBook)(nil)
