package apiroute

import (
	"errors"
	"strings"
	"testing"
)

// ParsePath never panics; what it refuses wraps ErrInvalidPath, and what
// it takes matches the paths its pattern describes.
func FuzzParsePath(f *testing.F) {
	for _, seed := range []string{
		"", "/", "/*", "/abc", "/foo/{*}/bar", "/foo/{**}", "/foo/{**}/bar", "/a{*}",
		"/{**}/{*}", "/a%2Fb", "/%41", "/a/../b", "//", "/a?b", "/caf\u00e9", "/{*}/{**}/x/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		p, err := ParsePath(pattern)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("ParsePath(%q): %v does not wrap ErrInvalidPath", pattern, err)
			}
			return
		}
		if p.String() != pattern || len(pattern) > maxPathLen {
			t.Fatalf("ParsePath(%q) took it as %q", pattern, p.String())
		}
		one := strings.ReplaceAll(pattern, "{*}", "x")
		for _, rest := range []string{"", "/y", "/y/z"} {
			if path := strings.ReplaceAll(one, "/{**}", rest); !p.Match(path) {
				t.Fatalf("%q does not match %q", pattern, path)
			}
		}
	})
}

// fuzzTable is the Table FuzzMatch matches against.
var fuzzTable, _ = Build([]APIRule[string]{
	apirule("ns1", "a", 0, []string{"a.example.com", "short"},
		rule("/foo/{*}/bar", "1", "GET"), rule("/foo/{**}/baz", "2", "POST", "GET"), rule("/a%2Fb", "3", "PUT")),
	apirule("ns2", "w", 1, []string{"*.example.com"}, rule("/*", "4", "GET")),
	apirule("ns3", "v", 2, []string{"*.b.example.com"}, rule("/x/{**}", "5", "DELETE")),
}, testOptions)

// Match never panics, and what it answers is consistent.
func FuzzMatch(f *testing.F) {
	for _, seed := range [][3]string{
		{"a.example.com", "/foo/x/bar", "GET"},
		{"A.EXAMPLE.COM:8080", "/foo/a/b/baz?x", "POST"},
		{"x.b.example.com.", "/x/%2F/..", "DELETE"},
		{"short.local.kfn.dev", "/a%2fb", "PUT"},
		{"\u212a.example.com", "/", "GET"},
		{"[::1]:80", "*", "OPTIONS"},
		{"", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, host, path, method string) {
		res := fuzzTable.Match(host, path, method)
		switch res.Outcome {
		case NoHost:
			if res != (Result[string]{}) {
				t.Fatalf("NoHost with %+v", res)
			}
		case NoRule, BadPath:
			if res.Route != nil || res.Host == "" {
				t.Fatalf("%v with %+v", res.Outcome, res)
			}
		case Matched:
			r := res.Route
			if r == nil || !r.Allows(method) || !r.Path.Match(path) || r.APIRule != res.APIRule {
				t.Fatalf("matched %q %q %q with %+v", host, path, method, res)
			}
		default:
			t.Fatalf("outcome %v", res.Outcome)
		}
	})
}
