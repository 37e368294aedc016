package delivery

import (
	"sync"
	"time"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// lines bounds the log lines the events of each namespace make: a sink
// that fails every delivery, replies past the hop limit or with what
// cannot be stored makes a line per event, thousands a second, and the
// event bridge's log (its disk, its collector) is every namespace's. Past
// its rate a namespace's lines are dropped and counted; its next line
// says how many were (droppedLines). Safe for concurrent use; a nil
// *lines bounds nothing.
type lines struct {
	perNamespace *ratelimit.PerKey

	mu      sync.Mutex
	dropped map[string]int64 // by namespace, since its last line
}

// newLines returns a bound of perSecond lines a second per namespace, in
// bursts of ten seconds' worth; nil, no bound, for a rate of 0 or less.
func newLines(perSecond float64) *lines {
	if perSecond <= 0 {
		return nil
	}
	return &lines{perNamespace: ratelimit.NewPerKey(perSecond, max(1, int(10*perSecond))), dropped: map[string]int64{}}
}

// take reports whether namespace may log a line now, and how many of its
// lines were dropped since its last one (counted off once told); a line
// refused is counted dropped.
func (l *lines) take(namespace string) (ok bool, droppedBefore int64) {
	if l == nil {
		return true, 0
	}
	allowed := l.perNamespace.AllowN(namespace, time.Now(), 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !allowed {
		l.dropped[namespace]++
		return false, 0
	}
	droppedBefore = l.dropped[namespace]
	delete(l.dropped, namespace)
	return true, droppedBefore
}
