package admission

import (
	"sync"
	"time"

	"github.com/kfn-dev/kfn/internal/ratelimit"
)

// Spent is what one sender took from a Rates' buckets: its events and
// bytes.
type Spent struct {
	// Namespace is the sender namespace; "" the publishers without one.
	Namespace string `json:"namespace"`
	Events    int64  `json:"events,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
}

// maxSpentKept bounds the senders a Rates records between two TakeSpent:
// the namespaces of a cluster are fewer; past it, what new senders take
// is not recorded (the other holders of the bound see less than was
// taken), and TakeSpent says so.
const maxSpentKept = 16384

// spentLog is what a Rates took since TakeSpent last emptied it. A nil
// *spentLog records nothing.
type spentLog struct {
	mu      sync.Mutex
	senders map[string]*Spent
	dropped int64
}

func (l *spentLog) add(sender string, events, bytes int64) {
	if l == nil || (events <= 0 && bytes <= 0) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.senders[sender]
	if s == nil {
		if len(l.senders) >= maxSpentKept {
			l.dropped++
			return
		}
		s = &Spent{Namespace: sender}
		l.senders[sender] = s
	}
	s.Events += max(events, 0)
	s.Bytes += max(bytes, 0)
}

// RecordSpent makes r record, from now on, what each sender takes from
// its buckets (Take, TakeBytes, Wait), for TakeSpent: one of the holders
// of a bound that several processes share (every event bridge replica
// holds each namespace to the same rate), which tell each other what they
// took (package eventbridge/sharedrates). Call it before r is used.
func (r *Rates) RecordSpent() {
	if r != nil && r.spent == nil {
		r.spent = &spentLog{senders: map[string]*Spent{}}
	}
}

// TakeSpent returns what each sender took from r's bounded buckets since
// the last call (nothing before RecordSpent), and forgets it; dropped
// counts the takes of senders past the ones a Rates records in that time.
func (r *Rates) TakeSpent() (spent []Spent, dropped int64) {
	if r == nil || r.spent == nil {
		return nil, 0
	}
	l := r.spent
	l.mu.Lock()
	defer l.mu.Unlock()
	spent = make([]Spent, 0, len(l.senders))
	for _, s := range l.senders {
		spent = append(spent, *s)
	}
	clear(l.senders)
	dropped, l.dropped = l.dropped, 0
	return spent, dropped
}

// Debit takes from r's buckets what another holder of the same bound
// took (s), whatever they hold, down to a debt of one burst each: r's next
// takes for that sender wait for it. The bound then holds for all of its
// holders together, up to what each took before it heard of the others.
// Negative counts debit nothing.
func (r *Rates) Debit(s Spent) {
	if r == nil {
		return
	}
	now := time.Now()
	events, bytes := clampInt(max(s.Events, 0)), clampInt(max(s.Bytes, 0))
	if s.Namespace == "" {
		if r.anonymous != nil {
			ratelimit.DebitLimiter(r.anonymous, now, events)
		}
		if r.anonymousBytes != nil {
			ratelimit.DebitLimiter(r.anonymousBytes, now, bytes)
		}
		return
	}
	if r.perSender != nil {
		r.perSender.Debit(s.Namespace, now, events)
	}
	if r.bytesPerSender != nil {
		r.bytesPerSender.Debit(s.Namespace, now, bytes)
	}
}
