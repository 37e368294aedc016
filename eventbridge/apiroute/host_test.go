package apiroute

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An APIRule's hosts are compiled to lower-case fully qualified names,
// short hosts in the default domain.
func TestParseHostAcceptsKymaHosts(t *testing.T) {
	tests := map[string]struct {
		host, name, key string
		wildcard        bool
	}{
		"fully qualified": {"my-app.example.com", "my-app.example.com", "my-app.example.com", false},
		"upper case":      {"My-App.Example.COM", "my-app.example.com", "my-app.example.com", false},
		"trailing dot":    {"my-app.example.com.", "my-app.example.com", "my-app.example.com", false},
		"short":           {"my-host", "my-host.local.kfn.dev", "my-host.local.kfn.dev", false},
		"short, upper":    {"MY-HOST", "my-host.local.kfn.dev", "my-host.local.kfn.dev", false},
		"wildcard":        {"*.Example.com", "*.example.com", "example.com", true},
		"deep wildcard":   {"*.a.b.example.com.", "*.a.b.example.com", "a.b.example.com", true},
		"digits":          {"10.0.0.1", "10.0.0.1", "10.0.0.1", false},
		"punycode":        {"xn--bcher-kva.example", "xn--bcher-kva.example", "xn--bcher-kva.example", false},
		"63-byte label":   {strings.Repeat("a", 63) + ".example.com", strings.Repeat("a", 63) + ".example.com", strings.Repeat("a", 63) + ".example.com", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, err := parseHost(tc.host, "local.kfn.dev")
			require.NoError(t, err)
			assert.Equal(t, host{name: tc.name, key: tc.key, wildcard: tc.wildcard}, h)
		})
	}
}

// Hosts outside Kyma's grammar are refused with a reason.
func TestParseHostRefusesInvalidHosts(t *testing.T) {
	tests := map[string]struct {
		host, domain, reason string
	}{
		"empty":              {"", "local.kfn.dev", "an empty label"},
		"only a dot":         {".", "local.kfn.dev", "an empty label"},
		"star alone":         {"*", "local.kfn.dev", `has '*'`},
		"wildcard of a TLD":  {"*.com", "local.kfn.dev", "two labels or more"},
		"star inside":        {"a.*.example.com", "local.kfn.dev", `has '*'`},
		"star glued":         {"*a.example.com", "local.kfn.dev", `has '*'`},
		"two stars":          {"*.*.example.com", "local.kfn.dev", `has '*'`},
		"empty label":        {"a..example.com", "local.kfn.dev", "an empty label"},
		"leading dot":        {".example.com", "local.kfn.dev", "an empty label"},
		"leading hyphen":     {"-a.example.com", "local.kfn.dev", "starts or ends with '-'"},
		"trailing hyphen":    {"a-.example.com", "local.kfn.dev", "starts or ends with '-'"},
		"underscore":         {"a_b.example.com", "local.kfn.dev", `has '_'`},
		"port":               {"a.example.com:8080", "local.kfn.dev", `has ':'`},
		"64-byte label":      {strings.Repeat("a", 64) + ".example.com", "local.kfn.dev", "longer than 63"},
		"254 bytes":          {strings.Repeat("abcdefg.", 31) + "exampl", "local.kfn.dev", "254 bytes, more than 253"},
		"unicode":            {"b\u00fccher.example", "local.kfn.dev", "not ASCII"},
		"Kelvin sign":        {"\u212aey.example.com", "local.kfn.dev", "not ASCII"},
		"short, no domain":   {"my-host", "", "no default domain"},
		"short, long domain": {"my-host", strings.Repeat("a", 64) + ".dev", "longer than 63"},
		"URL":                {"https://a.example.com", "local.kfn.dev", `has ':'`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseHost(tc.host, tc.domain)
			require.ErrorIs(t, err, ErrInvalidHost)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
}

// A request's Host is compared without case, port and trailing dot, and
// only when it is a plausible host name.
func TestRequestHost(t *testing.T) {
	tests := map[string]struct {
		host, want string // want "" for none
	}{
		"plain":           {"a.example.com", "a.example.com"},
		"upper case":      {"A.Example.COM", "a.example.com"},
		"port":            {"a.example.com:8080", "a.example.com"},
		"empty port":      {"a.example.com:", "a.example.com"},
		"trailing dot":    {"a.example.com.", "a.example.com"},
		"dot and port":    {"a.example.com.:443", "a.example.com"},
		"empty":           {"", ""},
		"port only":       {":80", ""},
		"two dots":        {"a.example.com..", ""},
		"empty label":     {"a..example.com", ""},
		"leading dot":     {".example.com", ""},
		"IPv6":            {"[::1]:8080", ""},
		"non-digit port":  {"a.example.com:http", ""},
		"unicode":         {"b\u00fccher.example", ""},
		"Kelvin sign":     {"\u212aey.example.com", ""},
		"underscore":      {"a_b.example.com", ""},
		"space":           {"a.example.com ", ""},
		"254 bytes":       {strings.Repeat("abcdefg.", 31) + "exampl", ""},
		"253 bytes":       {strings.Repeat("abcdefg.", 31) + "examp", strings.Repeat("abcdefg.", 31) + "examp"},
		"userinfo":        {"user@a.example.com", ""},
		"huge":            {strings.Repeat("a", 1<<20), ""},
		"numeric":         {"10.0.0.1:80", "10.0.0.1"},
		"single label":    {"LOCALHOST", "localhost"},
		"hyphens allowed": {"-.example.com", "-.example.com"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf [maxHostLen]byte
			got, ok := requestHost(tc.host, &buf)
			assert.Equal(t, tc.want != "", ok)
			if ok {
				assert.Equal(t, tc.want, string(got))
			}
		})
	}
}
