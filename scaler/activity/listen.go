package activity

import (
	"cmp"
	"slices"
	"strings"
)

// Push activation: while a Function is inactive, the scaler listens on
// its subjects (Listener), within the bounds of WithListenBounds.

// planListenersLocked decides, at a refresh, which Functions are
// listened for: those with Subscriptions, all of whose consumers exist
// (as of the last refresh that read them), within the bounds of listened
// subjects. It returns the inactive ones whose listener is to start (or
// change subjects), and the stop functions of the listeners of Functions
// no longer listened for, to be called without the lock. Without a
// Listener it does nothing.
func (s *Scaler) planListenersLocked() (toListen []*function, toStop []func()) {
	if s.listener == nil {
		return nil, nil
	}
	type namespace struct {
		name     string
		fns      []*function // within the namespace's bound
		subjects int
	}
	count := map[*function]int{}
	byName := map[string][]*function{}
	for _, fn := range s.functions {
		fn.listenable = false
		if len(fn.subs) > 0 && !fn.consumerMissing {
			count[fn] = len(fn.subjectList())
			byName[fn.key.Namespace] = append(byName[fn.key.Namespace], fn)
		}
	}
	overNamespaces := map[string]bool{}
	past := 0 // Functions past a bound
	namespaces := make([]namespace, 0, len(byName))
	for name, fns := range byName {
		slices.SortFunc(fns, func(a, b *function) int { return strings.Compare(a.key.Name, b.key.Name) })
		ns := namespace{name: name}
		for _, fn := range fns {
			if ns.subjects+count[fn] > s.o.maxListenPerNamespace {
				overNamespaces[name] = true
				past++
				continue
			}
			ns.subjects += count[fn]
			ns.fns = append(ns.fns, fn)
		}
		namespaces = append(namespaces, ns)
	}
	// The namespaces that ask for fewest subjects first: a large one does
	// not crowd a small one out of the total.
	slices.SortFunc(namespaces, func(a, b namespace) int {
		return cmp.Or(cmp.Compare(a.subjects, b.subjects), strings.Compare(a.name, b.name))
	})
	total, overTotal := 0, false
	for _, ns := range namespaces {
		for _, fn := range ns.fns {
			if total+count[fn] > s.o.maxListen {
				overTotal = true
				past++
				continue
			}
			total += count[fn]
			fn.listenable = true
		}
	}

	for _, fn := range s.functions {
		switch {
		case !fn.listenable:
			if stop := fn.detachListener(); stop != nil {
				toStop = append(toStop, stop)
			}
		case fn.active: // listened for again once inactive
		case fn.stopListen == nil || fn.listenSubject != fn.subjects():
			toListen = append(toListen, fn)
		}
	}
	s.logBoundsLocked(overNamespaces, overTotal)
	s.o.metrics.setListened(total, past)
	return toListen, toStop
}

// logBoundsLocked logs the namespaces that went past their bound of
// listened subjects, and the total bound being reached, once each time.
func (s *Scaler) logBoundsLocked(overNamespaces map[string]bool, overTotal bool) {
	for name := range overNamespaces {
		if !s.overNamespaces[name] {
			s.o.log.Warn("namespace past its bound of listened subjects; the refresh wakes its Functions past it",
				"namespace", name, "bound", s.o.maxListenPerNamespace)
		}
	}
	if overTotal && !s.overTotal {
		s.o.log.Warn("bound of listened subjects reached; the refresh wakes the Functions past it",
			"bound", s.o.maxListen)
	}
	s.overNamespaces, s.overTotal = overNamespaces, overTotal
}

// listen starts a listener for each Function that was inactive at the
// refresh, unless it became active, changed or was found past the bounds
// meanwhile.
func (s *Scaler) listen(fns []*function) {
	if s.listener == nil {
		return
	}
	for _, fn := range fns {
		s.mu.Lock()
		subjects := fn.subjectList()
		want := strings.Join(subjects, " ")
		s.mu.Unlock()
		key := fn.key
		stop, err := s.listener.Listen(subjects, func() { s.signal(key, "event") })
		if err != nil {
			s.o.log.Warn("listen for events failed; the next refresh finds them",
				"namespace", key.Namespace, "function", key.Name, "error", err)
			continue
		}
		s.mu.Lock()
		current := s.functions[key]
		if current != fn || fn.active || !fn.listenable || fn.subjects() != want {
			s.mu.Unlock()
			stop()
			continue
		}
		old := fn.detachListener()
		fn.stopListen, fn.listenSubject = stop, want
		s.mu.Unlock()
		if old != nil {
			old()
		}
	}
}

func (s *Scaler) stopListeners() {
	s.mu.Lock()
	var stops []func()
	for _, fn := range s.functions {
		if stop := fn.detachListener(); stop != nil {
			stops = append(stops, stop)
		}
	}
	s.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// subjectList returns the sorted, de-duplicated subjects of fn's
// Subscriptions.
func (fn *function) subjectList() []string {
	var out []string
	for _, b := range fn.subs {
		out = append(out, b.Subjects...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (fn *function) subjects() string { return strings.Join(fn.subjectList(), " ") }

func (fn *function) detachListener() func() {
	stop := fn.stopListen
	fn.stopListen, fn.listenSubject = nil, ""
	return stop
}
