package apiroute

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ParsePath refuses every pattern outside Kyma's grammar, and those that
// could never match, with an error that says why.
func TestParsePathRefusesInvalidPatterns(t *testing.T) {
	tests := map[string]struct {
		pattern string
		reason  string
	}{
		"empty":                  {"", "empty"},
		"relative":               {"abc", "does not start with '/'"},
		"star glued after":       {"/a{*}", "whole segments"},
		"star glued before":      {"/{*}b", "whole segments"},
		"double star glued":      {"/x{**}", "whole segments"},
		"star after double star": {"/{**}/{*}", "{**} must be the last operator"},
		"two double stars":       {"/{**}/a/{**}", "a second {**}"},
		"bare star segment":      {"/a/*", "only the whole path /*"},
		"star then more":         {"/*/a", "only the whole path /*"},
		"no leading slash star":  {"*", "does not start with '/'"},
		"three stars":            {"/{***}", "whole segments"},
		"empty braces":           {"/{}", "whole segments"},
		"space":                  {"/a b", `character ' '`},
		"unicode":                {"/caf\u00e9", "is not allowed"},
		"question mark":          {"/a?b=1", `character '?'`},
		"fragment":               {"/a#b", `character '#'`},
		"backslash":              {`/a\b`, `character '\\'`},
		"NUL":                    {"/a\x00", `character '\x00'`},
		"bad escape":             {"/a%zz", "malformed percent escape"},
		"truncated escape":       {"/a%2", "malformed percent escape"},
		"lone percent":           {"/%", "malformed percent escape"},
		"escaped letter":         {"/%41dmin", `write 'A' instead of %41`},
		"escaped dot":            {"/%2e%2E", `write '.' instead of %2e`},
		"dot dot segment":        {"/a/../b", `segment ".."`},
		"dot segment":            {"/./a", `segment "."`},
		"65 segments":            {strings.Repeat("/a", 65), "more than 64 segments"},
		"1025 bytes":             {"/" + strings.Repeat("a", 1024), "1025 bytes, more than 1024"},
		"huge":                   {"/" + strings.Repeat("{**}/", 1<<20), "more than 1024"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePath(tc.pattern)
			require.ErrorIs(t, err, ErrInvalidPath)
			assert.Contains(t, err.Error(), tc.reason)
			assert.False(t, p.Match("/a"), "a refused path is the zero Path")
		})
	}
}

// ParsePath takes Kyma's patterns, at their bounds too, and gives them back.
func TestParsePathAcceptsValidPatterns(t *testing.T) {
	for name, pattern := range map[string]string{
		"root":                 "/",
		"exact":                "/abc",
		"trailing slash":       "/abc/",
		"empty segment":        "/a//b",
		"all characters":       "/AZaz09-._~!$&'()+,;=:@",
		"escapes":              "/a%2Fb%20c%c3%a9",
		"star":                 "/foo/{*}/bar",
		"double star":          "/foo/{**}",
		"double star inside":   "/{*}/foo/{**}/bar/baz",
		"everything":           "/*",
		"everything, spelled":  "/{**}",
		"dots within segments": "/a.b/...",
		"64 segments":          strings.Repeat("/a", 64),
		"1024 bytes":           "/" + strings.Repeat("a", 1023),
	} {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePath(pattern)
			require.NoError(t, err)
			assert.Equal(t, pattern, p.String())
		})
	}
}

// Paths match Kyma's way: literals exactly, {*} one non-empty segment,
// {**} zero or more segments, as received and without normalization.
func TestPathMatch(t *testing.T) {
	tests := map[string]struct {
		pattern string
		match   []string
		miss    []string
	}{
		"exact": {"/abc",
			[]string{"/abc", "/abc?x=1"},
			[]string{"/", "", "/abc/", "/ABC", "/abcd", "/abc/d", "//abc", "/%61bc", "abc"}},
		"root": {"/",
			[]string{"/", "", "/?q"},
			[]string{"//", "/a"}},
		"trailing slash": {"/abc/",
			[]string{"/abc/"},
			[]string{"/abc", "/abc//"}},
		"star": {"/foo/{*}/bar",
			[]string{"/foo/x/bar", "/foo/%2F/bar", "/foo/a%2Fb/bar", "/foo/*/bar", "/foo/.../bar"},
			[]string{"/foo/bar", "/foo//bar", "/foo/x/y/bar", "/foo/x/bar/", "/foo/../bar", "/foo/./bar", "/foo/%2e%2e/bar"}},
		"double star at end": {"/foo/{**}",
			[]string{"/foo", "/foo/", "/foo/a", "/foo/a/b", "/foo//", "/foo/a%2Fb"},
			[]string{"/", "/foobar", "/fo", "/bar/foo", "/foo/../admin", "/foo/%2E%2E/admin"}},
		"double star inside": {"/foo/{**}/bar",
			[]string{"/foo/bar", "/foo/a/bar", "/foo/a/b/bar", "/foo//bar", "/foo/bar/bar"},
			[]string{"/foo", "/foo/", "/bar", "/foo/bar/", "/foo/a/bar/b", "/foo/../bar"}},
		"star then double star": {"/{*}/x/{**}/y/z",
			[]string{"/a/x/y/z", "/a/x/b/c/y/z"},
			[]string{"/x/y/z", "//x/y/z", "/a/x/y", "/a/x/z"}},
		"everything": {"/*",
			[]string{"/", "", "/a", "/a/b/c", "//", "/%2F"},
			[]string{"*", "a", "/..", "/a/./b", "/%41"}},
		"everything, spelled": {"/{**}",
			[]string{"/", "/a", "/a/b/c"},
			[]string{"/../a"}},
		"escape": {"/a%2Fb",
			[]string{"/a%2Fb", "/a%2fb"},
			[]string{"/a/b", "/a%2Fc", "/a%2Fbb", "/a%3Fb"}},
		"empty segment": {"/a//b",
			[]string{"/a//b"},
			[]string{"/a/b", "/a///b"}},
		"malformed request escapes": {"/*",
			nil,
			[]string{"/%", "/%2", "/%zz", "/a%G0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePath(tc.pattern)
			require.NoError(t, err)
			for _, path := range tc.match {
				assert.True(t, p.Match(path), "%s should match %q", tc.pattern, path)
			}
			for _, path := range tc.miss {
				assert.False(t, p.Match(path), "%s should not match %q", tc.pattern, path)
			}
		})
	}
}

// The zero Path matches nothing.
func TestZeroPathMatchesNothing(t *testing.T) {
	var p Path
	for _, path := range []string{"", "/", "/a", "//"} {
		assert.False(t, p.Match(path), path)
	}
}

// Matching a path that is long and deep stays linear and correct.
func TestPathMatchHugeRequestPath(t *testing.T) {
	p, err := ParsePath("/a/{**}/b/c")
	require.NoError(t, err)
	middle := strings.Repeat("/x", 1<<16)
	assert.True(t, p.Match("/a"+middle+"/b/c"))
	assert.False(t, p.Match("/a"+middle+"/b/d"))
	assert.False(t, p.Match("/a"+middle+"/.."+"/b/c"))
}
