package apiroute

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hosts match without case, port and trailing dot; an exact host beats a
// wildcard, a longer wildcard a shorter one, and a wildcard needs a label
// of its own.
func TestMatchHosts(t *testing.T) {
	table, errs := Build([]APIRule[string]{
		apirule("ns1", "exact", 0, []string{"my-app.example.com", "short"}, rule("/*", "exact", "GET")),
		apirule("ns1", "wild", 1, []string{"*.example.com"}, rule("/*", "wild", "GET")),
		apirule("ns2", "deeper", 2, []string{"*.a.example.com"}, rule("/*", "deeper", "GET")),
	}, testOptions)
	for key, err := range errs {
		require.NoError(t, err, key)
	}
	tests := map[string]struct {
		host, want, name string // want "" for NoHost
	}{
		"exact":                    {"my-app.example.com", "exact", "my-app.example.com"},
		"short host in its domain": {"short.local.kfn.dev", "exact", "short.local.kfn.dev"},
		"short host alone":         {"short", "", ""},
		"upper case":               {"MY-APP.Example.Com", "exact", "my-app.example.com"},
		"port":                     {"my-app.example.com:8080", "exact", "my-app.example.com"},
		"trailing dot and port":    {"my-app.example.com.:443", "exact", "my-app.example.com"},
		"wildcard, one label":      {"x.example.com", "wild", "*.example.com"},
		"wildcard, two labels":     {"x.y.example.com", "wild", "*.example.com"},
		"wildcard, upper case":     {"X.EXAMPLE.COM:80", "wild", "*.example.com"},
		"not the wildcard's apex":  {"example.com", "", ""},
		"longer wildcard":          {"x.a.example.com", "deeper", "*.a.example.com"},
		"longer wildcard's apex":   {"a.example.com", "wild", "*.example.com"},
		"suffix without a dot":     {"xexample.com", "", ""},
		"empty label":              {"x..example.com", "", ""},
		"unicode":                  {"b\u00fccher.example.com", "", ""},
		"Kelvin sign":              {"\u212a.example.com", "", ""},
		"unknown":                  {"other.dev", "", ""},
		"empty":                    {"", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := table.Match(tc.host, "/", "GET")
			if tc.want == "" {
				assert.Equal(t, Result[string]{}, res)
				return
			}
			require.Equal(t, Matched, res.Outcome)
			assert.Equal(t, tc.want, res.Route.Target)
			assert.Equal(t, tc.want, res.APIRule.Name)
			assert.Equal(t, tc.name, res.Host)
		})
	}
}

// Within an APIRule, the first rule that has both the path and the method
// serves; a host without such a rule is NoRule, a path not in canonical
// form BadPath.
func TestMatchRulesInOrder(t *testing.T) {
	table, errs := Build([]APIRule[string]{
		apirule("ns", "app", 0, []string{"app.example.com"},
			rule("/api/{*}", "item", "GET", "HEAD"),
			rule("/api/{**}", "api", "GET", "POST"),
			rule("/*", "all", "GET"),
			rule("/api/x", "shadowed", "GET", "DELETE"),
		),
	}, testOptions)
	require.NoError(t, errs[Key{"ns", "app"}])
	tests := map[string]struct {
		path, method string
		outcome      Outcome
		index        int
		target       string
	}{
		"first rule":              {"/api/x", "GET", Matched, 0, "item"},
		"first rule, HEAD":        {"/api/x", "HEAD", Matched, 0, "item"},
		"second rule by method":   {"/api/x", "POST", Matched, 1, "api"},
		"second rule by path":     {"/api/x/y", "GET", Matched, 1, "api"},
		"zero segments":           {"/api", "POST", Matched, 1, "api"},
		"catch-all":               {"/other", "GET", Matched, 2, "all"},
		"root":                    {"/", "GET", Matched, 2, "all"},
		"query ignored":           {"/api/x?y=/z", "GET", Matched, 0, "item"},
		"escaped slash":           {"/api/a%2Fb", "GET", Matched, 0, "item"},
		"shadowed rule's method":  {"/api/x", "DELETE", Matched, 3, "shadowed"},
		"method not allowed":      {"/other", "POST", NoRule, 0, ""},
		"HEAD is not GET":         {"/api", "HEAD", NoRule, 0, ""},
		"lower-case method":       {"/api/x", "get", NoRule, 0, ""},
		"unknown method":          {"/api/x", "PROPFIND", NoRule, 0, ""},
		"empty method":            {"/api/x", "", NoRule, 0, ""},
		"dot dot":                 {"/api/../admin", "GET", BadPath, 0, ""},
		"escaped dot dot":         {"/api/%2e%2E/admin", "GET", BadPath, 0, ""},
		"escaped letter":          {"/%61pi/x", "GET", BadPath, 0, ""},
		"asterisk form":           {"*", "OPTIONS", BadPath, 0, ""},
		"absolute form":           {"http://app.example.com/api/x", "GET", BadPath, 0, ""},
		"malformed escape":        {"/api/%zz", "GET", BadPath, 0, ""},
		"empty segment, no {*}":   {"/api//", "HEAD", NoRule, 0, ""},
		"empty segments, {**}":    {"/api//", "GET", Matched, 1, "api"},
		"bad path, unknown verb":  {"/..", "BREW", BadPath, 0, ""},
		"unicode, raw (not sent)": {"/api/\u00e9", "GET", Matched, 0, "item"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := table.Match("app.example.com", tc.path, tc.method)
			require.Equal(t, tc.outcome, res.Outcome, res.Outcome.String())
			assert.Equal(t, "app.example.com", res.Host)
			assert.Equal(t, Key{"ns", "app"}, res.APIRule)
			if tc.outcome != Matched {
				assert.Nil(t, res.Route)
				return
			}
			assert.Equal(t, tc.index, res.Route.Index)
			assert.Equal(t, tc.target, res.Route.Target)
			assert.Equal(t, Key{"ns", "app"}, res.Route.APIRule)
			assert.True(t, res.Route.Allows(tc.method))
		})
	}
}

// A nil or empty Table has no hosts.
func TestMatchEmptyTables(t *testing.T) {
	var nilTable *Table[string]
	empty, errs := Build[string](nil, Options{})
	assert.Empty(t, errs)
	for name, table := range map[string]*Table[string]{"nil": nilTable, "empty": empty} {
		assert.Equal(t, Result[string]{}, table.Match("a.example.com", "/", "GET"), name)
		assert.Zero(t, table.Hosts(), name)
		assert.Empty(t, table.Kept(), name)
	}
}

// TestKeptListsTheServedAPIRules: Kept lists each APIRule the table
// serves once, by namespace and name, with its hosts as Match names them
// (a short host in its domain, a wildcard as written), sorted, and its
// rules in order with their methods in a fixed order; an APIRule refused
// (a host taken) is not among them.
func TestKeptListsTheServedAPIRules(t *testing.T) {
	table, errs := Build([]APIRule[string]{
		apirule("ns2", "b", 0, []string{"short", "*.example.com", "a.example.org"}, rule("/api/{**}", "api", "POST", "GET"), rule("/", "home", "GET")),
		apirule("ns1", "a", 1, []string{"one.example.net"}, rule("/*", "one", "PATCH", "DELETE")),
		apirule("ns1", "late", 2, []string{"one.example.net"}, rule("/*", "late", "GET")),
	}, testOptions)
	require.Error(t, errs[Key{Namespace: "ns1", Name: "late"}])
	kept := table.Kept()
	require.Len(t, kept, 2)
	assert.Equal(t, Key{Namespace: "ns1", Name: "a"}, kept[0].Key)
	assert.Equal(t, []string{"one.example.net"}, kept[0].Hosts)
	assert.Equal(t, []string{"DELETE", "PATCH"}, kept[0].Routes[0].Methods())
	assert.Equal(t, Key{Namespace: "ns2", Name: "b"}, kept[1].Key)
	assert.Equal(t, []string{"*.example.com", "a.example.org", "short.local.kfn.dev"}, kept[1].Hosts)
	require.Len(t, kept[1].Routes, 2)
	assert.Equal(t, "/api/{**}", kept[1].Routes[0].Path.String())
	assert.Equal(t, []string{"GET", "POST"}, kept[1].Routes[0].Methods())
	assert.Equal(t, "home", kept[1].Routes[1].Target)
}

// Match allocates nothing, whatever the request.
func TestMatchAllocatesNothing(t *testing.T) {
	table, _ := Build([]APIRule[string]{
		apirule("ns", "app", 0, []string{"app.example.com", "*.example.com"},
			rule("/api/{*}/x", "item", "GET"), rule("/a%2Fb/{**}/c", "all", "POST")),
	}, testOptions)
	requests := [][3]string{
		{"app.example.com", "/api/1/x", "GET"},
		{"APP.example.com:8080", "/a%2fb/c/d/c?q", "POST"},
		{"x.y.Example.com.", "/nothing", "GET"},
		{"other.dev", "/", "GET"},
		{"app.example.com", "/api/../x", "GET"},
	}
	for _, r := range requests {
		allocs := testing.AllocsPerRun(100, func() { _ = table.Match(r[0], r[1], r[2]) })
		assert.Zero(t, allocs, "%q", r)
	}
}

// Outcomes name themselves.
func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{NoHost: "no host", NoRule: "no rule", BadPath: "bad path", Matched: "matched", 9: "unknown outcome"} {
		assert.Equal(t, want, o.String())
	}
	assert.Equal(t, "ns/name", Key{"ns", "name"}.String())
}
