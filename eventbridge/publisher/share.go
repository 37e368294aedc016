package publisher

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// DefaultMaxPublishing is Config.MaxPublishing by default.
const DefaultMaxPublishing = 1024

// ErrOverShare is wrapped by the refusal (429, Retry-After) of a request
// that comes while the publisher works on Config.MaxPublishing requests
// or more, from a sender that already has its share of them.
var ErrOverShare = errors.New("over its share of the publisher")

// publishing counts the requests the publisher works on (from knowing
// their sender to their answer) per sender namespace, "" for every
// request without one together, and shares them under contention: while
// fewer than max are in progress, or all are one sender's, every request
// is taken, so a sender alone may have as many as it sends (Kyma's model,
// where every publish is anonymous, is never refused); past max, a
// sender's request is taken only while it has fewer than max over the
// senders with requests in progress (itself counted). So one namespace's
// flood of publishes, valid or not, or of requests whose bodies come
// slowly, leaves the others theirs, and a sender below its share is never
// refused. It is safe for concurrent use.
type publishing struct {
	max int // <= 0: no bound

	mu       sync.Mutex
	total    int
	bySender map[string]int // senders with requests in progress
}

func newPublishing(max int) *publishing {
	return &publishing{max: max, bySender: map[string]int{}}
}

// enter counts a request of sender until leave, or refuses it with an
// error wrapping ErrOverShare.
func (p *publishing) enter(sender string) error {
	if p.max <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.bySender[sender]
	if p.total >= p.max {
		senders := len(p.bySender)
		if !ok {
			senders++
		}
		if share := max(p.max/senders, 1); senders > 1 && n >= share {
			who := "namespace " + sender
			if sender == "" {
				who = "publishers without a namespace (together)"
			}
			return fmt.Errorf("%w: the publisher works on %d requests, the most it takes at once, and %s send %d of them, their share; try again later",
				ErrOverShare, p.total, who, n)
		}
	}
	p.bySender[sender] = n + 1
	p.total++
	return nil
}

// inProgress is how many requests enter took that are not yet answered
// (0 without a bound: they are not counted).
func (p *publishing) inProgress() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// leave says a request of sender that enter took was answered.
func (p *publishing) leave(sender string) {
	if p.max <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if n := p.bySender[sender] - 1; n > 0 {
		p.bySender[sender] = n
	} else {
		delete(p.bySender, sender)
	}
}

// takeTurn waits for a turn among the requests of sender's namespace
// (Config.PublishingPerNamespace) for a request whose body was read, at
// most StoreTimeout: the error wraps ErrBusy. Requests without a
// namespace take none. Call giveTurn once the request is answered.
func (p *Publisher) takeTurn(r *http.Request, sender string) error {
	if sender == "" {
		return nil
	}
	if err := p.turns.Enter(p.stores.Context(r.Context()), sender); err != nil {
		held, waiting := p.turns.Held(sender)
		return fmt.Errorf("%w: namespace %s works on %d publishes at once, its most, and %d more wait; this one waited %s; try again later",
			ErrBusy, sender, held, waiting, p.cfg.StoreTimeout)
	}
	return nil
}

// giveTurn gives back the turn takeTurn took for sender.
func (p *Publisher) giveTurn(sender string) {
	if sender != "" {
		p.turns.Leave(sender)
	}
}
