package apiroute

import (
	"errors"
	"time"
)

// Errors that refuse a rule path or an APIRule. Every error this package
// returns wraps exactly one of them or of the tenancy errors below; test
// with errors.Is.
var (
	// ErrInvalidPath refuses a rule path (see ParsePath).
	ErrInvalidPath = errors.New("invalid rule path")
	// ErrInvalidHost refuses an APIRule host.
	ErrInvalidHost = errors.New("invalid host")
	// ErrInvalidMethod refuses a method a rule lists.
	ErrInvalidMethod = errors.New("invalid method")
	// ErrInvalidAPIRule refuses an APIRule without hosts or without rules.
	ErrInvalidAPIRule = errors.New("invalid APIRule")
)

// Errors that refuse an APIRule for the others' sake (tenancy).
var (
	// ErrHostTaken refuses an APIRule that claims a host an older APIRule
	// holds.
	ErrHostTaken = errors.New("host taken")
	// ErrTooMany refuses an APIRule that would pass its namespace's bound
	// on rules or hosts.
	ErrTooMany = errors.New("too many rules or hosts in namespace")
	// ErrReservedHost refuses an APIRule host that would take requests
	// meant for others: one of Options.Reserved's domains, or a wildcard
	// over every short host.
	ErrReservedHost = errors.New("reserved host")
)

// Default bounds per namespace, used when Options leaves them zero.
const (
	DefaultMaxRulesPerNamespace = 100
	DefaultMaxHostsPerNamespace = 20
)

// Key names an APIRule.
type Key struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// APIRule is what Build needs of one APIRule: its name, its creation time
// (the older APIRule keeps a host both claim), its hosts and its rules in
// order.
type APIRule[T any] struct {
	Key
	Created time.Time
	// Served says the APIRule was served when last built (its status
	// says so): of APIRules created in the same second, the served ones
	// keep their hosts, so that a host does not move to a newer APIRule
	// that sorts first.
	Served bool
	// Hosts are fully qualified ("my-app.example.com"), short ("my-app",
	// in Options.DefaultDomain) or wildcards ("*.example.com"), in any case
	// and with or without a trailing dot.
	Hosts []string
	// Rules are tried in order; the first whose path and method match a
	// request serves it.
	Rules []Rule[T]
}

// Rule is one rule of an APIRule.
type Rule[T any] struct {
	// Path is a pattern as ParsePath takes it.
	Path string
	// Methods are the HTTP methods the rule serves, upper case: GET, HEAD,
	// POST, PUT, DELETE, CONNECT, OPTIONS, TRACE or PATCH.
	Methods []string
	// Target is the caller's, carried to the Route unchanged.
	Target T
}

// Options bound and complete the APIRules Build takes.
type Options struct {
	// DefaultDomain is the domain of short hosts: "my-app" is
	// "my-app.<DefaultDomain>". Without it, short hosts are refused; a
	// wildcard over it ("*.<DefaultDomain>", every short host of every
	// namespace) always is.
	DefaultDomain string
	// Reserved are domains no APIRule host may be in or cover by a
	// wildcard (a gateway's own routing by host: "svc.cluster.local").
	Reserved []string
	// MaxRulesPerNamespace bounds the rules of the APIRules kept in one
	// namespace; zero or less means DefaultMaxRulesPerNamespace.
	MaxRulesPerNamespace int
	// MaxHostsPerNamespace bounds the hosts of the APIRules kept in one
	// namespace; zero or less means DefaultMaxHostsPerNamespace.
	MaxHostsPerNamespace int
}

// Route is one rule of a kept APIRule, compiled.
type Route[T any] struct {
	// APIRule names the APIRule the rule belongs to.
	APIRule Key
	// Index is the rule's index in the APIRule's rules.
	Index int
	// Path is the rule's path.
	Path Path
	// Target is the rule's Target.
	Target T

	methods methodSet
}

// Allows reports whether the route's rule lists method (case-sensitive,
// as HTTP methods are).
func (r *Route[T]) Allows(method string) bool { return r.methods&methodBit(method) != 0 }

// Methods returns the methods the route's rule lists, in a fixed order
// (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH).
func (r *Route[T]) Methods() []string { return r.methods.names() }

// Outcome says how a request fared in Table.Match.
type Outcome uint8

// The outcomes of Table.Match. Every one but Matched is answered 404.
const (
	// NoHost: no kept APIRule has the request's host.
	NoHost Outcome = iota
	// NoRule: an APIRule has the host, but none of its rules has both the
	// request's path and its method.
	NoRule
	// BadPath: an APIRule has the host, but the request's path is not in
	// canonical form, so no rule may match it (see the package comment).
	BadPath
	// Matched: a rule serves the request.
	Matched
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case NoHost:
		return "no host"
	case NoRule:
		return "no rule"
	case BadPath:
		return "bad path"
	case Matched:
		return "matched"
	}
	return "unknown outcome"
}

// Result is Table.Match's answer.
type Result[T any] struct {
	Outcome Outcome
	// Host is the host of the APIRule that has the request's host, lower
	// case: the full name ("my-app.local.kfn.dev" for "my-app") or the
	// wildcard ("*.example.com"). Empty with NoHost.
	Host string
	// APIRule names the APIRule that has the request's host. Zero with
	// NoHost.
	APIRule Key
	// Route is the rule that serves the request; nil unless Matched. It is
	// the Table's: the caller must not change it.
	Route *Route[T]
}
