package logging

import (
	"sync"
	"time"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// Budget bounds the lines logged per key a second (a namespace, say, or
// one key for all): a line per event or per request lets whoever makes
// events or requests fill the log every component and tenant shares.
// Past its rate a key's lines are refused and counted; its next line is
// told how many were (Take), for it to say so (DroppedKey). A nil *Budget
// bounds nothing. Safe for concurrent use.
type Budget struct {
	perKey *ratelimit.PerKey

	mu      sync.Mutex
	dropped map[string]int64 // by key, since its last line
}

// DroppedKey is the key under which a line says how many of its key's
// lines were dropped before it.
const DroppedKey = "droppedLines"

// NewBudget returns a Budget of perSecond lines a second per key, in
// bursts of ten seconds' worth; nil, no bound, for a rate of 0 or less.
func NewBudget(perSecond float64) *Budget {
	if perSecond <= 0 {
		return nil
	}
	return &Budget{perKey: ratelimit.NewPerKey(perSecond, max(1, int(10*perSecond))), dropped: map[string]int64{}}
}

// Take reports whether key may log a line now, and how many of its lines
// were dropped since its last one (counted off once told); a line
// refused counts as dropped.
func (b *Budget) Take(key string) (ok bool, droppedBefore int64) {
	if b == nil {
		return true, 0
	}
	allowed := b.perKey.AllowN(key, time.Now(), 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !allowed {
		b.dropped[key]++
		return false, 0
	}
	droppedBefore = b.dropped[key]
	delete(b.dropped, key)
	return true, droppedBefore
}
