package eventpath

// Find returns the chains, most recently active first, that hold an event
// of CloudEvents id id (and source source, unless empty): the event's
// whole path, from the events that started its chain to everything that
// followed from them. None when kfn dev holds no such event (never seen,
// or older than the events it keeps).
func (r *Recorder) Find(id, source string) []Chain {
	var out []Chain
	for _, c := range r.Chains(0) {
		if c.Has(id, source) {
			out = append(out, c)
		}
	}
	return out
}

// Has reports whether the chain holds an event of id id (and source
// source, unless empty), at any depth.
func (c Chain) Has(id, source string) bool {
	for _, e := range c.Events {
		if e.has(id, source) {
			return true
		}
	}
	return false
}

// Is reports whether e is the event of id id (and source source, unless
// empty).
func (e *Event) Is(id, source string) bool {
	return e.ID == id && (source == "" || e.Source == source)
}

func (e *Event) has(id, source string) bool {
	if e.Is(id, source) {
		return true
	}
	for _, d := range e.Deliveries {
		for _, x := range d.Emitted {
			if x.has(id, source) {
				return true
			}
		}
	}
	for _, x := range e.Replays {
		if x.has(id, source) {
			return true
		}
	}
	return false
}

// Bound is how many events r keeps: the most recent, by stream sequence.
func (r *Recorder) Bound() int { return r.max }
