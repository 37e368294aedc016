package apiroute

import (
	"slices"
	"strings"
)

// Table is a compiled set of APIRules, made by Build. It is immutable and
// safe for concurrent use. A nil Table has no hosts.
type Table[T any] struct {
	exact    map[string]entry[T] // by host name
	wildcard map[string]entry[T] // by the suffix after "*."
}

// entry is a host of a kept APIRule.
type entry[T any] struct {
	name  string // as Result.Host
	owner *owner[T]
}

// owner is a kept APIRule: its name and its rules, in order.
type owner[T any] struct {
	key    Key
	routes []Route[T]
}

// Match decides which rule serves a request, given its Host header (any
// case, with or without a port and a trailing dot), its path as
// r.URL.EscapedPath returns it and its method. An exact host is preferred
// to a wildcard, and a longer wildcard to a shorter one; within the
// APIRule that has the host, the first rule that has both the path and the
// method serves. Match allocates nothing.
func (t *Table[T]) Match(host, escapedPath, method string) Result[T] {
	if t == nil {
		return Result[T]{}
	}
	e, ok := t.lookup(host)
	if !ok {
		return Result[T]{}
	}
	res := Result[T]{Outcome: NoRule, Host: e.name, APIRule: e.owner.key}
	rel, ok := requestPath(escapedPath)
	if !ok {
		res.Outcome = BadPath
		return res
	}
	bit := methodBit(method)
	if bit == 0 {
		return res
	}
	for i := range e.owner.routes {
		if r := &e.owner.routes[i]; r.methods&bit != 0 && r.Path.match(rel) {
			res.Outcome, res.Route = Matched, r
			return res
		}
	}
	return res
}

// lookup finds the entry of a request's Host.
func (t *Table[T]) lookup(h string) (entry[T], bool) {
	var buf [maxHostLen]byte
	name, ok := requestHost(h, &buf)
	if !ok {
		return entry[T]{}, false
	}
	if e, ok := t.exact[string(name)]; ok {
		return e, true
	}
	if len(t.wildcard) == 0 {
		return entry[T]{}, false
	}
	for i, c := range name { // the longest suffix first
		if c != '.' {
			continue
		}
		if e, ok := t.wildcard[string(name[i+1:])]; ok {
			return e, true
		}
	}
	return entry[T]{}, false
}

// Hosts returns the number of hosts the Table has, exact and wildcard.
func (t *Table[T]) Hosts() int {
	if t == nil {
		return 0
	}
	return len(t.exact) + len(t.wildcard)
}

// Kept is an APIRule the Table serves: its hosts, as Result.Host names
// them (a wildcard host "*.example.com"), sorted, and its rules, in order.
type Kept[T any] struct {
	Key    Key
	Hosts  []string
	Routes []Route[T]
}

// Kept returns the APIRules the Table serves, by namespace and name.
func (t *Table[T]) Kept() []Kept[T] {
	if t == nil {
		return nil
	}
	byOwner := map[*owner[T]]*Kept[T]{}
	for _, hosts := range []map[string]entry[T]{t.exact, t.wildcard} {
		for _, e := range hosts {
			k, ok := byOwner[e.owner]
			if !ok {
				k = &Kept[T]{Key: e.owner.key, Routes: e.owner.routes}
				byOwner[e.owner] = k
			}
			k.Hosts = append(k.Hosts, e.name)
		}
	}
	out := make([]Kept[T], 0, len(byOwner))
	for _, k := range byOwner {
		slices.Sort(k.Hosts)
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b Kept[T]) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	return out
}
