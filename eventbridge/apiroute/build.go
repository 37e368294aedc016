package apiroute

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Build compiles APIRules into a Table. It considers them in creation
// order (ties broken by namespace, then name) and keeps each one that is
// valid, claims no host an APIRule kept before holds (after short hosts
// take the default domain, ignoring case; two different wildcards may
// overlap) and keeps its namespace within the bounds of opts. It refuses
// any other APIRule whole.
//
// The map has an entry for every APIRule: nil when it was kept, else the
// error that refused it, wrapping ErrInvalidPath, ErrInvalidHost,
// ErrInvalidMethod, ErrInvalidAPIRule, ErrHostTaken or ErrTooMany. An
// APIRule listed twice counts once, as the first in creation order.
func Build[T any](apirules []APIRule[T], opts Options) (*Table[T], map[Key]error) {
	b := builder[T]{
		opts:  normalize(opts),
		table: &Table[T]{exact: map[string]entry[T]{}, wildcard: map[string]entry[T]{}},
		errs:  make(map[Key]error, len(apirules)),
		rules: map[string]int{},
		hosts: map[string]int{},
	}
	for _, i := range creationOrder(apirules) {
		a := &apirules[i]
		if _, seen := b.errs[a.Key]; !seen {
			b.errs[a.Key] = b.add(a)
		}
	}
	return b.table, b.errs
}

// builder is Build's state.
type builder[T any] struct {
	opts  Options
	table *Table[T]
	errs  map[Key]error
	rules map[string]int // the rules kept, by namespace
	hosts map[string]int // the hosts kept, by namespace
}

// normalize completes opts with defaults and puts the default domain in
// the form hosts are compared in.
func normalize(opts Options) Options {
	if opts.MaxRulesPerNamespace <= 0 {
		opts.MaxRulesPerNamespace = DefaultMaxRulesPerNamespace
	}
	if opts.MaxHostsPerNamespace <= 0 {
		opts.MaxHostsPerNamespace = DefaultMaxHostsPerNamespace
	}
	opts.DefaultDomain = strings.ToLower(strings.Trim(opts.DefaultDomain, "."))
	reserved := make([]string, 0, len(opts.Reserved))
	for _, r := range opts.Reserved {
		if r = strings.ToLower(strings.Trim(r, ".")); r != "" {
			reserved = append(reserved, r)
		}
	}
	opts.Reserved = reserved
	return opts
}

// creationOrder returns the indexes of apirules, oldest first; of those
// created in the same second (the API server's resolution), the ones that
// were served first.
func creationOrder[T any](apirules []APIRule[T]) []int {
	order := make([]int, len(apirules))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := &apirules[i], &apirules[j]
		return cmp.Or(a.Created.Compare(b.Created), servedFirst(a.Served, b.Served),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return order
}

// servedFirst orders a served APIRule before one that was not.
func servedFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// add keeps the APIRule, or returns why not.
func (b *builder[T]) add(a *APIRule[T]) error {
	// Bound the work before compiling.
	if err := b.checkBounds(a.Namespace, len(a.Rules), len(a.Hosts)); err != nil {
		return err
	}
	hosts, err := b.compileHosts(a.Hosts)
	if err != nil {
		return err
	}
	routes, err := compileRules(a)
	if err != nil {
		return err
	}
	if err := b.checkFree(hosts); err != nil {
		return err
	}
	b.keep(a.Key, hosts, routes)
	return nil
}

// checkBounds refuses rules and hosts that would pass the namespace's
// bounds.
func (b *builder[T]) checkBounds(namespace string, rules, hosts int) error {
	if n := b.rules[namespace] + rules; n > b.opts.MaxRulesPerNamespace {
		return fmt.Errorf("%w: namespace %q would have %d rules, more than %d", ErrTooMany, namespace, n, b.opts.MaxRulesPerNamespace)
	}
	if n := b.hosts[namespace] + hosts; n > b.opts.MaxHostsPerNamespace {
		return fmt.Errorf("%w: namespace %q would have %d hosts, more than %d", ErrTooMany, namespace, n, b.opts.MaxHostsPerNamespace)
	}
	return nil
}

// compileHosts compiles an APIRule's hosts, refusing none and one listed
// twice.
func (b *builder[T]) compileHosts(names []string) ([]host, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no hosts", ErrInvalidAPIRule)
	}
	hosts := make([]host, 0, len(names))
	for _, n := range names {
		// Reserved first: "*.localhost" is refused as taking every short
		// host, before as a wildcard over one label.
		if err := b.checkReserved(roughHost(n, b.opts.DefaultDomain)); err != nil {
			return nil, err
		}
		h, err := parseHost(n, b.opts.DefaultDomain)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(hosts, func(o host) bool { return o.name == h.name }) {
			return nil, fmt.Errorf("%w %q: listed twice (as %s)", ErrInvalidHost, n, h.name)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// roughHost is h as parseHost would name it, unchecked.
func roughHost(h, defaultDomain string) host {
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if suffix, ok := strings.CutPrefix(name, "*."); ok {
		return host{name: name, key: suffix, wildcard: true}
	}
	if !strings.Contains(name, ".") && defaultDomain != "" {
		name += "." + defaultDomain
	}
	return host{name: name, key: name}
}

// checkReserved refuses a host in or over a reserved domain, and a
// wildcard over every short host.
func (b *builder[T]) checkReserved(h host) error {
	for _, r := range b.opts.Reserved {
		if h.name == r || strings.HasSuffix(h.name, "."+r) || h.wildcard && (h.key == r || strings.HasSuffix(r, "."+h.key)) {
			return fmt.Errorf("%w: host %s names cluster Services (*.%s), which the gateway routes to their Functions: expose a host of your own", ErrReservedHost, h.name, r)
		}
	}
	if dd := b.opts.DefaultDomain; h.wildcard && dd != "" && (h.key == dd || strings.HasSuffix(dd, "."+h.key)) {
		return fmt.Errorf("%w: host %s would take every short host of every namespace: name the hosts you expose", ErrReservedHost, h.name)
	}
	return nil
}

// compileRules compiles an APIRule's rules, refusing none.
func compileRules[T any](a *APIRule[T]) ([]Route[T], error) {
	if len(a.Rules) == 0 {
		return nil, fmt.Errorf("%w: no rules", ErrInvalidAPIRule)
	}
	routes := make([]Route[T], len(a.Rules))
	for i, r := range a.Rules {
		path, err := ParsePath(r.Path)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		methods, err := parseMethods(r.Methods)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		routes[i] = Route[T]{APIRule: a.Key, Index: i, Path: path, Target: r.Target, methods: methods}
	}
	return routes, nil
}

// checkFree refuses hosts an APIRule kept before holds.
func (b *builder[T]) checkFree(hosts []host) error {
	for _, h := range hosts {
		if e, taken := b.table.entries(h)[h.key]; taken {
			return fmt.Errorf("%w: %s is held by APIRule %s", ErrHostTaken, h.name, e.owner.key)
		}
	}
	return nil
}

// keep adds the APIRule's hosts and routes to the table.
func (b *builder[T]) keep(key Key, hosts []host, routes []Route[T]) {
	o := &owner[T]{key: key, routes: routes}
	for _, h := range hosts {
		b.table.entries(h)[h.key] = entry[T]{name: h.name, owner: o}
	}
	b.rules[key.Namespace] += len(routes)
	b.hosts[key.Namespace] += len(hosts)
}

// entries returns the map the host belongs in.
func (t *Table[T]) entries(h host) map[string]entry[T] {
	if h.wildcard {
		return t.wildcard
	}
	return t.exact
}
