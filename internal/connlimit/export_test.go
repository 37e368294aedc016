package connlimit

import "net"

// Kept is what a bounded listener keeps of its connections: the slots
// taken and, of them, leaving, and the entries of each of its maps.
type Kept struct {
	Open, Leaving                   int
	Sources, Conns, Served, ByAddrs int
}

// KeptBy is what lis, a listener Bound returned, keeps now.
func KeptBy(lis net.Listener) Kept {
	l := lis.(*counted).limit
	l.mu.Lock()
	defer l.mu.Unlock()
	return Kept{
		Open: l.open, Leaving: l.leaving,
		Sources: len(l.sources), Conns: len(l.conns), Served: len(l.served), ByAddrs: len(l.byAddrs),
	}
}

// HeldBy is what source holds on lis, a listener Bound returned: its
// slots and, of them, leaving ones; ok is false when lis keeps no entry
// for it.
func HeldBy(lis net.Listener, source string) (open, leaving int, ok bool) {
	l := lis.(*counted).limit
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.sources[source]
	if !ok {
		return 0, 0, false
	}
	return h.open, h.leaving, true
}
