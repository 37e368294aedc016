package apiroute

import (
	"fmt"
	"strings"
)

// Bounds on a rule path.
const (
	maxPathLen      = 1024
	maxPathSegments = 64
)

// Path is a compiled rule path. Its zero value matches no path.
type Path struct {
	pattern string
	head    []segment // the segments before {**}, or all of them
	tail    []segment // the literal segments after {**}
	rest    bool      // the path has {**}
}

// segment is one segment of a rule path: a literal or {*}.
type segment struct {
	lit     string
	any     bool // {*}: any one non-empty segment
	escaped bool // lit has percent escapes, compared ignoring hex case
}

// ParsePath compiles a rule path: segments after a leading '/', each a
// literal, "{*}" (exactly one non-empty segment) or "{**}" (zero or more
// segments, empty ones included; no operator may follow it, literals may).
// "/*" alone is "/{**}". A literal is made of A-Z a-z 0-9 - . _ ~ ! $ & '
// ( ) + , ; = : @ and percent escapes; it may be empty ("/a/" ends in an
// empty segment). Patterns over 1024 bytes or 64 segments, with "." or
// ".." segments, or escaping an unreserved character (write it plainly)
// are refused too, with an error wrapping ErrInvalidPath.
func ParsePath(pattern string) (Path, error) {
	switch {
	case pattern == "":
		return Path{}, fmt.Errorf("%w: empty", ErrInvalidPath)
	case len(pattern) > maxPathLen:
		return Path{}, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidPath, len(pattern), maxPathLen)
	case pattern[0] != '/':
		return Path{}, pathError(pattern, "it does not start with '/'")
	case strings.Count(pattern, "/") > maxPathSegments:
		return Path{}, pathError(pattern, "more than %d segments", maxPathSegments)
	case pattern == "/*":
		return Path{pattern: pattern, rest: true}, nil
	}
	p := Path{pattern: pattern, head: make([]segment, 0, strings.Count(pattern, "/"))}
	for s := range strings.SplitSeq(pattern[1:], "/") {
		if err := p.add(s); err != nil {
			return Path{}, pathError(pattern, "%s", err)
		}
	}
	return p, nil
}

// add appends segment s to the path being compiled.
func (p *Path) add(s string) error {
	var seg segment
	switch s {
	case "{**}":
		if p.rest {
			return fmt.Errorf("a second {**}: {**} must be the last operator")
		}
		p.rest = true
		return nil
	case "{*}":
		if p.rest {
			return fmt.Errorf("{*} after {**}: {**} must be the last operator")
		}
		seg.any = true
	default:
		var err error
		if seg, err = literal(s); err != nil {
			return err
		}
	}
	if p.rest {
		p.tail = append(p.tail, seg)
	} else {
		p.head = append(p.head, seg)
	}
	return nil
}

// literal compiles a literal segment.
func literal(s string) (segment, error) {
	if s == "." || s == ".." {
		return segment{}, fmt.Errorf("segment %q: no request path with it matches", s)
	}
	seg := segment{lit: s}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			b, ok := unescape(s, i)
			if !ok {
				return segment{}, fmt.Errorf("segment %q: malformed percent escape", s)
			}
			if unreserved(b) {
				return segment{}, fmt.Errorf("segment %q: write %q instead of %s", s, b, s[i:i+3])
			}
			seg.escaped = true
			i += 2
		case pathByte(c):
		case c == '{' || c == '}' || c == '*':
			return segment{}, fmt.Errorf("segment %q: {*} and {**} must be whole segments, and * is only the whole path /*", s)
		default:
			return segment{}, fmt.Errorf("segment %q: character %q is not allowed", s, c)
		}
	}
	return seg, nil
}

// pathError wraps ErrInvalidPath with the pattern and a reason.
func pathError(pattern, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidPath, pattern, fmt.Sprintf(format, args...))
}

// String returns the pattern the path was parsed from.
func (p Path) String() string { return p.pattern }

// Match reports whether the path matches escapedPath, a request's path as
// r.URL.EscapedPath returns it (a query after '?' is ignored; "" is "/").
// A path not in canonical form matches no rule path.
func (p Path) Match(escapedPath string) bool {
	rel, ok := requestPath(escapedPath)
	return ok && p.match(rel)
}

// match matches rel, a canonical request path without its leading '/'.
func (p *Path) match(rel string) bool {
	rest, more := rel, true
	var seg string
	for _, s := range p.head {
		if !more {
			return false
		}
		seg, rest, more = cutFirst(rest)
		if !s.matches(seg) {
			return false
		}
	}
	if !p.rest {
		return !more
	}
	for j := len(p.tail) - 1; j >= 0; j-- {
		if !more {
			return false
		}
		rest, seg, more = cutLast(rest)
		if !p.tail[j].matches(seg) {
			return false
		}
	}
	return true // {**} takes what is left
}

// cutFirst splits the first segment off s; more is false when it was the
// last.
func cutFirst(s string) (seg, rest string, more bool) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// cutLast splits the last segment off s; more is false when it was the
// first.
func cutLast(s string) (rest, seg string, more bool) {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return "", s, false
}

// matches reports whether the segment matches a request's segment.
func (s segment) matches(seg string) bool {
	switch {
	case s.any:
		return seg != ""
	case !s.escaped:
		return seg == s.lit
	}
	return equalEscaped(s.lit, seg)
}

// equalEscaped compares a literal with percent escapes and a canonical
// request segment, ignoring the case of the escapes' hex digits.
func equalEscaped(lit, seg string) bool {
	if len(lit) != len(seg) {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '%' {
			if lit[i] != seg[i] {
				return false
			}
			continue
		}
		if seg[i] != '%' || upper(lit[i+1]) != upper(seg[i+1]) || upper(lit[i+2]) != upper(seg[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

// requestPath returns a request's escaped path without its query and its
// leading '/', or false when it is not in canonical form: it does not
// start with '/', has a "." or ".." segment, a malformed escape or an
// escape of an unreserved character.
func requestPath(escaped string) (string, bool) {
	if i := strings.IndexByte(escaped, '?'); i >= 0 {
		escaped = escaped[:i]
	}
	if escaped == "" {
		return "", true
	}
	if escaped[0] != '/' {
		return "", false
	}
	rel := escaped[1:]
	start := 0
	for i := 0; i <= len(rel); i++ {
		switch {
		case i == len(rel) || rel[i] == '/':
			if seg := rel[start:i]; seg == "." || seg == ".." {
				return "", false
			}
			start = i + 1
		case rel[i] == '%':
			if b, ok := unescape(rel, i); !ok || unreserved(b) {
				return "", false
			}
			i += 2
		}
	}
	return rel, true
}

// unescape decodes the percent escape at s[i].
func unescape(s string, i int) (byte, bool) {
	if i+2 >= len(s) {
		return 0, false
	}
	hi, ok1 := fromHex(s[i+1])
	lo, ok2 := fromHex(s[i+2])
	return hi<<4 | lo, ok1 && ok2
}

// fromHex returns the value of hex digit c.
func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// upper returns c in upper case if it is an ASCII letter.
func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// unreserved reports whether c is an unreserved character (RFC 3986),
// one that a canonical path never escapes.
func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// pathByte reports whether c may stand unescaped in a literal segment.
func pathByte(c byte) bool {
	return unreserved(c) || strings.IndexByte("!$&'()+,;=:@", c) >= 0
}
