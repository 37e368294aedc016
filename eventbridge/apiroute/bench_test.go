package apiroute

import (
	"fmt"
	"testing"
)

// benchAPIRules returns n APIRules, ten a namespace, each with an exact
// host, a short host, a wildcard and five rules.
func benchAPIRules(n int) []APIRule[int] {
	apirules := make([]APIRule[int], n)
	for i := range apirules {
		apirules[i] = APIRule[int]{
			Key:     Key{Namespace: fmt.Sprintf("ns-%d", i/5), Name: fmt.Sprintf("app-%d", i)},
			Created: created,
			Hosts: []string{
				fmt.Sprintf("app-%d.example.com", i), fmt.Sprintf("short-%d", i), fmt.Sprintf("*.w-%d.example.com", i),
			},
			Rules: []Rule[int]{
				{Path: "/api/v1/items/{*}", Methods: []string{"GET", "HEAD"}, Target: 0},
				{Path: "/api/v1/items", Methods: []string{"GET", "POST"}, Target: 1},
				{Path: "/static/{**}", Methods: []string{"GET"}, Target: 2},
				{Path: "/api/{**}/health", Methods: []string{"GET"}, Target: 3},
				{Path: "/*", Methods: []string{"GET", "POST"}, Target: 4},
			},
		}
	}
	return apirules
}

// BenchmarkMatch matches requests against the Table of 1,000 APIRules.
func BenchmarkMatch(b *testing.B) {
	table, errs := Build(benchAPIRules(1000), Options{DefaultDomain: "local.kfn.dev"})
	for key, err := range errs {
		if err != nil {
			b.Fatal(key, err)
		}
	}
	for name, r := range map[string][3]string{
		"exact host, first rule":   {"app-500.example.com", "/api/v1/items/42", "GET"},
		"exact host, last rule":    {"app-500.example.com", "/some/page", "POST"},
		"double star inside":       {"app-500.example.com", "/api/v1/a/b/health", "GET"},
		"short host with port":     {"short-999.local.kfn.dev:8080", "/static/css/site.css", "GET"},
		"upper-case wildcard host": {"X.Y.W-7.Example.COM", "/api/v1/items", "POST"},
		"no host":                  {"a.b.c.d.unknown.dev", "/", "GET"},
		"no rule":                  {"app-1.example.com", "/api/v1/items/42", "DELETE"},
		"bad path":                 {"app-1.example.com", "/static/../secret", "GET"},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = table.Match(r[0], r[1], r[2])
			}
		})
	}
}

// BenchmarkBuild builds the Table of 1,000 APIRules.
func BenchmarkBuild(b *testing.B) {
	apirules := benchAPIRules(1000)
	opts := Options{DefaultDomain: "local.kfn.dev"}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Build(apirules, opts)
	}
}
