package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// heldSlot is one held request's place among those MaxHeld bounds.
type heldSlot struct {
	namespace string
	// taken is closed when another namespace's request took the slot
	// (Config.MaxHeldPerNamespace); g.mu guards closing it.
	taken chan struct{}
}

// Why hold gives up waiting.
var (
	errHoldTimeout = errors.New("the hold timeout passed")
	errClientGone  = errors.New("the client left")
	errSlotTaken   = errors.New("its namespace held the most requests of all, and another namespace's took its place")
)

// hold waits for a ready backend of fn: it returns nil once there is one,
// an error saying why it gave up otherwise (the hold timeout passed, the
// client left, too many requests are held for fn's namespace or in all,
// or another namespace's request took its slot).
func (g *Gateway) hold(r *http.Request, fn types.NamespacedName, changed <-chan struct{}) error {
	slot, err := g.takeSlot(fn.Namespace)
	if err != nil {
		return err
	}
	defer g.giveSlot(slot)
	timeout := time.NewTimer(g.cfg.HoldTimeout)
	defer timeout.Stop()
	for {
		select {
		case <-changed:
			var ready bool
			if ready, changed = g.backends.Ready(fn.Namespace, fn.Name); ready {
				return nil
			}
		case <-timeout.C:
			return errHoldTimeout
		case <-r.Context().Done():
			return errClientGone
		case <-slot.taken:
			return errSlotTaken
		}
	}
}

// takeSlot takes a slot for a request of namespace ns to wait in: none
// past MaxHeldPerNamespace for ns; past MaxHeld, the slot of the newest
// request of the namespace that holds the most, if that is more than ns
// would hold with this one (max-min fairness: the tenant over its share
// gives way).
func (g *Gateway) takeSlot(ns string) (*heldSlot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	mine := len(g.heldBy[ns])
	if mine >= g.cfg.MaxHeldPerNamespace {
		return nil, fmt.Errorf("namespace %s holds %d requests for Functions without a ready backend, its most", ns, mine)
	}
	if g.held >= g.cfg.MaxHeld {
		most, over := 0, ""
		for n, slots := range g.heldBy {
			if len(slots) > most {
				most, over = len(slots), n
			}
		}
		if most <= mine+1 {
			return nil, fmt.Errorf("the gateway holds %d requests, its most, and namespace %s holds its share of them", g.held, ns)
		}
		slots := g.heldBy[over]
		close(slots[len(slots)-1].taken)
		g.dropLocked(over, len(slots)-1)
	}
	slot := &heldSlot{namespace: ns, taken: make(chan struct{})}
	g.heldBy[ns] = append(g.heldBy[ns], slot)
	g.held++
	return slot, nil
}

// giveSlot gives back a slot takeSlot gave, unless another namespace's
// request took it.
func (g *Gateway) giveSlot(slot *heldSlot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, s := range g.heldBy[slot.namespace] {
		if s == slot {
			g.dropLocked(slot.namespace, i)
			return
		}
	}
}

// dropLocked removes the i-th slot of namespace ns. g.mu is held.
func (g *Gateway) dropLocked(ns string, i int) {
	slots := g.heldBy[ns]
	if len(slots) == 1 {
		delete(g.heldBy, ns)
	} else {
		g.heldBy[ns] = append(slots[:i:i], slots[i+1:]...)
	}
	g.held--
}

// Held returns how many requests wait for a ready backend now.
func (g *Gateway) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}
