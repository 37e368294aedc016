package apiroute

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reserved are testOptions with the gateway's reserved domains.
var reserved = Options{DefaultDomain: "local.kfn.dev", Reserved: []string{".svc.cluster.local", "svc."}}

// An invalid APIRule is refused whole, with a reason; the others are kept.
func TestBuildRefusesInvalidAPIRules(t *testing.T) {
	good := rule("/*", "t", "GET")
	tests := map[string]struct {
		apirule  APIRule[string]
		opts     Options
		sentinel error
		reason   string
	}{
		"no hosts":           {apirule("ns", "x", 0, nil, good), testOptions, ErrInvalidAPIRule, "no hosts"},
		"no rules":           {apirule("ns", "x", 0, []string{"x.example.com"}), testOptions, ErrInvalidAPIRule, "no rules"},
		"bad host":           {apirule("ns", "x", 0, []string{"x.example.com", "a..b"}, good), testOptions, ErrInvalidHost, `"a..b"`},
		"host twice":         {apirule("ns", "x", 0, []string{"x", "X.local.kfn.dev."}, good), testOptions, ErrInvalidHost, "listed twice (as x.local.kfn.dev)"},
		"short, no domain":   {apirule("ns", "x", 0, []string{"x"}, good), Options{}, ErrInvalidHost, "no default domain"},
		"bad domain":         {apirule("ns", "x", 0, []string{"x"}, good), Options{DefaultDomain: "a_b.dev"}, ErrInvalidHost, `has '_'`},
		"bad path":           {apirule("ns", "x", 0, []string{"x.example.com"}, good, rule("/a{*}", "t", "GET")), testOptions, ErrInvalidPath, `rule 1: invalid rule path "/a{*}"`},
		"no methods":         {apirule("ns", "x", 0, []string{"x.example.com"}, rule("/", "t")), testOptions, ErrInvalidMethod, "rule 0: invalid method: the rule lists no method"},
		"lower-case verb":    {apirule("ns", "x", 0, []string{"x.example.com"}, rule("/", "t", "GET", "get")), testOptions, ErrInvalidMethod, `rule 0: invalid method "get"`},
		"too many rules":     {apirule("ns", "x", 0, []string{"x.example.com"}, rules(101)...), testOptions, ErrTooMany, `namespace "ns" would have 101 rules, more than 100`},
		"too many hosts":     {apirule("ns", "x", 0, hosts("h", 21), good), testOptions, ErrTooMany, `namespace "ns" would have 21 hosts, more than 20`},
		"a Service's host":   {apirule("ns", "x", 0, []string{"Pay.Bank.svc.cluster.local."}, good), reserved, ErrReservedHost, "host pay.bank.svc.cluster.local names cluster Services (*.svc.cluster.local)"},
		"a reserved domain":  {apirule("ns", "x", 0, []string{"x.svc"}, good), reserved, ErrReservedHost, "names cluster Services (*.svc)"},
		"a wildcard over it": {apirule("ns", "x", 0, []string{"*.cluster.local"}, good), reserved, ErrReservedHost, "names cluster Services (*.svc.cluster.local)"},
		"every short host":   {apirule("ns", "x", 0, []string{"*.local.kfn.dev"}, good), testOptions, ErrReservedHost, "would take every short host"},
		"over short hosts":   {apirule("ns", "x", 0, []string{"*.kfn.dev"}, good), testOptions, ErrReservedHost, "host *.kfn.dev would take every short host"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kept := apirule("ns", "kept", 1, []string{"kept.example.com"}, good)
			table, errs := Build([]APIRule[string]{tc.apirule, kept}, tc.opts)
			require.ErrorIs(t, errs[tc.apirule.Key], tc.sentinel)
			assert.Contains(t, errs[tc.apirule.Key].Error(), tc.reason)
			require.Contains(t, errs, kept.Key)
			assert.NoError(t, errs[kept.Key])
			assert.Equal(t, Matched, table.Match("kept.example.com", "/", "GET").Outcome)
			assert.Equal(t, NoHost, table.Match("x.example.com", "/", "GET").Outcome)
			assert.Equal(t, 1, table.Hosts())
		})
	}
}

// The bounds are inclusive and default to 100 rules and 20 hosts.
func TestBuildDefaultBounds(t *testing.T) {
	_, errs := Build([]APIRule[string]{
		apirule("a", "rules", 0, []string{"a.example.com"}, rules(100)...),
		apirule("b", "hosts", 0, hosts("h", 20), rules(1)...),
	}, testOptions)
	assert.Equal(t, map[Key]error{{"a", "rules"}: nil, {"b", "hosts"}: nil}, errs)
}

// The oldest APIRule keeps a host others claim (after short hosts take the
// default domain, without case); ties go by namespace, then name; the
// refusal names the host and its holder.
func TestBuildGivesAHostToTheOldest(t *testing.T) {
	good := rule("/*", "t", "GET")
	tests := map[string]struct {
		apirules          []APIRule[string]
		holder, refused   Key
		host, requestHost string
	}{
		"older first": {[]APIRule[string]{
			apirule("ns1", "old", 1, []string{"x.example.com"}, good),
			apirule("ns2", "new", 2, []string{"X.Example.COM."}, good),
		}, Key{"ns1", "old"}, Key{"ns2", "new"}, "x.example.com", "x.example.com"},
		"newer first": {[]APIRule[string]{
			apirule("ns2", "new", 2, []string{"x.example.com"}, good),
			apirule("ns1", "old", 1, []string{"x.example.com"}, good),
		}, Key{"ns1", "old"}, Key{"ns2", "new"}, "x.example.com", "x.example.com"},
		"tie, by namespace": {[]APIRule[string]{
			apirule("b", "a", 1, []string{"x.example.com"}, good),
			apirule("a", "z", 1, []string{"x.example.com"}, good),
		}, Key{"a", "z"}, Key{"b", "a"}, "x.example.com", "x.example.com"},
		"tie, by name": {[]APIRule[string]{
			apirule("ns", "b", 1, []string{"x.example.com"}, good),
			apirule("ns", "a", 1, []string{"x.example.com"}, good),
		}, Key{"ns", "a"}, Key{"ns", "b"}, "x.example.com", "x.example.com"},
		"tie, the served one keeps it": {[]APIRule[string]{
			apirule("ns", "a", 1, []string{"x.example.com"}, good),
			served(apirule("ns", "b", 1, []string{"x.example.com"}, good)),
		}, Key{"ns", "b"}, Key{"ns", "a"}, "x.example.com", "x.example.com"},
		"older, though not served": {[]APIRule[string]{
			apirule("ns", "a", 1, []string{"x.example.com"}, good),
			served(apirule("ns", "b", 2, []string{"x.example.com"}, good)),
		}, Key{"ns", "a"}, Key{"ns", "b"}, "x.example.com", "x.example.com"},
		"short and full": {[]APIRule[string]{
			apirule("ns1", "short", 1, []string{"my-host"}, good),
			apirule("ns2", "full", 2, []string{"other.example.com", "MY-HOST.local.kfn.dev"}, good),
		}, Key{"ns1", "short"}, Key{"ns2", "full"}, "my-host.local.kfn.dev", "my-host.local.kfn.dev:80"},
		"same wildcard": {[]APIRule[string]{
			apirule("ns1", "w1", 1, []string{"*.example.com"}, good),
			apirule("ns2", "w2", 2, []string{"*.EXAMPLE.com"}, good),
		}, Key{"ns1", "w1"}, Key{"ns2", "w2"}, "*.example.com", "a.b.example.com"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			table, errs := Build(tc.apirules, testOptions)
			require.NoError(t, errs[tc.holder])
			err := errs[tc.refused]
			require.ErrorIs(t, err, ErrHostTaken)
			assert.Contains(t, err.Error(), tc.host+" is held by APIRule "+tc.holder.String())
			res := table.Match(tc.requestHost, "/", "GET")
			assert.Equal(t, tc.holder, res.APIRule)
			assert.Equal(t, tc.host, res.Host)
		})
	}
}

// A refused APIRule holds none of its hosts, not even the free ones.
func TestBuildRefusedAPIRuleHoldsNothing(t *testing.T) {
	good := rule("/*", "t", "GET")
	table, errs := Build([]APIRule[string]{
		apirule("ns1", "a", 1, []string{"taken.example.com"}, good),
		apirule("ns2", "b", 2, []string{"free.example.com", "taken.example.com"}, good),
		apirule("ns3", "c", 3, []string{"free.example.com"}, good),
	}, testOptions)
	require.ErrorIs(t, errs[Key{"ns2", "b"}], ErrHostTaken)
	require.NoError(t, errs[Key{"ns3", "c"}])
	assert.Equal(t, Key{"ns3", "c"}, table.Match("free.example.com", "/", "GET").APIRule)
}

// Different wildcards may overlap each other and exact hosts; the most
// specific host serves.
func TestBuildAllowsOverlappingWildcards(t *testing.T) {
	good := rule("/*", "t", "GET")
	table, errs := Build([]APIRule[string]{
		apirule("ns1", "wide", 1, []string{"*.example.com"}, good),
		apirule("ns2", "narrow", 2, []string{"*.a.example.com"}, good),
		apirule("ns3", "exact", 3, []string{"b.a.example.com", "a.example.com"}, good),
	}, testOptions)
	for key, err := range errs {
		require.NoError(t, err, key)
	}
	for host, want := range map[string]string{
		"z.example.com":     "wide",
		"a.example.com":     "exact",
		"c.a.example.com":   "narrow",
		"b.a.example.com":   "exact",
		"x.b.a.example.com": "narrow",
	} {
		assert.Equal(t, want, table.Match(host, "/", "GET").APIRule.Name, host)
	}
}

// Bounds per namespace are applied in creation order: an APIRule that
// would pass them is refused whole and later ones that fit are kept.
func TestBuildBoundsNamespaces(t *testing.T) {
	opts := Options{DefaultDomain: "local.kfn.dev", MaxRulesPerNamespace: 10, MaxHostsPerNamespace: 3}
	table, errs := Build([]APIRule[string]{
		apirule("r", "c", 3, []string{"b"}, rules(4)...),
		apirule("r", "b", 2, []string{"b"}, rules(5)...),
		apirule("r", "a", 1, []string{"a"}, rules(6)...),
		apirule("other", "d", 4, []string{"d"}, rules(10)...),
		apirule("h", "e", 1, hosts("e", 2), rules(1)...),
		apirule("h", "f", 2, hosts("f", 2), rules(1)...),
		apirule("h", "g", 3, hosts("g", 1), rules(1)...),
		apirule("alone", "big", 0, []string{"big"}, rules(11)...),
	}, opts)
	for key, want := range map[Key]string{
		{"r", "b"}:       `namespace "r" would have 11 rules, more than 10`,
		{"h", "f"}:       `namespace "h" would have 4 hosts, more than 3`,
		{"alone", "big"}: `namespace "alone" would have 11 rules, more than 10`,
	} {
		require.ErrorIs(t, errs[key], ErrTooMany, key)
		assert.Contains(t, errs[key].Error(), want)
	}
	for _, key := range []Key{{"r", "a"}, {"r", "c"}, {"other", "d"}, {"h", "e"}, {"h", "g"}} {
		assert.NoError(t, errs[key], key)
	}
	assert.Len(t, errs, 8)
	assert.Equal(t, Key{"r", "c"}, table.Match("b.local.kfn.dev", "/rc", "GET").APIRule)
	assert.Equal(t, NoHost, table.Match("big.local.kfn.dev", "/", "GET").Outcome)
}

// An APIRule listed twice counts once, as the first in creation order.
func TestBuildCountsAnAPIRuleListedTwiceOnce(t *testing.T) {
	table, errs := Build([]APIRule[string]{
		apirule("ns", "x", 2, []string{"second.example.com"}, rule("/", "second", "GET")),
		apirule("ns", "x", 1, []string{"first.example.com"}, rule("/", "first", "GET")),
	}, testOptions)
	assert.Equal(t, map[Key]error{{"ns", "x"}: nil}, errs)
	assert.Equal(t, Matched, table.Match("first.example.com", "/", "GET").Outcome)
	assert.Equal(t, NoHost, table.Match("second.example.com", "/", "GET").Outcome)
}

// Build's answer does not depend on the order of its input.
func TestBuildIsDeterministic(t *testing.T) {
	var apirules []APIRule[string]
	for i := range 40 {
		ns := string(rune('a' + i%3))
		apirules = append(apirules, apirule(ns, "r"+string(rune('a'+i)), i%7,
			[]string{hosts("h", 4)[i%4], "*.w" + string(rune('a'+i%5)) + ".example.com"}, rules(1+i%30)...))
	}
	_, want := Build(apirules, testOptions)
	refused := 0
	for _, err := range want {
		if err != nil {
			refused++
		}
	}
	require.Positive(t, refused, "some APIRules are refused")
	require.Less(t, refused, len(want), "some are kept")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		rng.Shuffle(len(apirules), func(i, j int) { apirules[i], apirules[j] = apirules[j], apirules[i] })
		_, got := Build(apirules, testOptions)
		assert.Equal(t, want, got)
	}
}
