package apiroute

import (
	"fmt"
	"strings"
)

// Bounds on a host name (RFC 1035).
const (
	maxHostLen  = 253
	maxLabelLen = 63
)

// host is an APIRule's host, compiled.
type host struct {
	name     string // lower case, fully qualified: "a.example.com", "*.example.com"
	key      string // the key in the Table's maps: name, or the wildcard's suffix
	wildcard bool
}

// parseHost compiles an APIRule's host: a fully qualified domain name of
// two labels or more, a short host (one label, in defaultDomain) or a
// wildcard "*." followed by a fully qualified domain name. Case and one
// trailing dot do not matter.
func parseHost(h, defaultDomain string) (host, error) {
	if !ascii(h) {
		return host{}, fmt.Errorf("%w %q: not ASCII (write an internationalized name in its xn-- form)", ErrInvalidHost, h)
	}
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if suffix, ok := strings.CutPrefix(name, "*."); ok {
		if err := checkDomain(suffix); err != nil {
			return host{}, fmt.Errorf("%w %q: %v", ErrInvalidHost, h, err)
		}
		return host{name: name, key: suffix, wildcard: true}, nil
	}
	if !strings.Contains(name, ".") {
		if err := checkLabel(name); err != nil {
			return host{}, fmt.Errorf("%w %q: %v", ErrInvalidHost, h, err)
		}
		if defaultDomain == "" {
			return host{}, fmt.Errorf("%w %q: a short host, and there is no default domain", ErrInvalidHost, h)
		}
		name += "." + defaultDomain
	}
	if err := checkDomain(name); err != nil {
		return host{}, fmt.Errorf("%w %q: %v", ErrInvalidHost, h, err)
	}
	return host{name: name, key: name}, nil
}

// checkDomain checks a lower-case fully qualified domain name.
func checkDomain(name string) error {
	if len(name) > maxHostLen {
		return fmt.Errorf("%d bytes, more than %d", len(name), maxHostLen)
	}
	if !strings.Contains(name, ".") {
		return fmt.Errorf("%q is not a domain of two labels or more", name)
	}
	for label := range strings.SplitSeq(name, ".") {
		if err := checkLabel(label); err != nil {
			return err
		}
	}
	return nil
}

// checkLabel checks a lower-case RFC 1123 label.
func checkLabel(label string) error {
	switch {
	case label == "":
		return fmt.Errorf("an empty label")
	case len(label) > maxLabelLen:
		return fmt.Errorf("label %q is longer than %d", label, maxLabelLen)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-'", label)
	}
	for i := range len(label) {
		if c := label[i]; !hostByte(c) {
			return fmt.Errorf("label %q has %q: want a-z, 0-9 or '-'", label, c)
		}
	}
	return nil
}

// requestHost writes a request's Host, lower case, without its port and
// its trailing dot, into buf, or reports false when it is no host name:
// empty or empty labels, longer than 253 bytes, or a byte other than an
// ASCII letter, a digit, '-' or '.'. Non-ASCII never matches, so that no
// case mapping can turn it into ASCII (as the Kelvin sign becomes 'k').
func requestHost(h string, buf *[maxHostLen]byte) ([]byte, bool) {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && digits(h[i+1:]) {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > maxHostLen {
		return nil, false
	}
	dot := true // at the start of a label
	for i := range len(h) {
		c := requestHostBytes[h[i]]
		if c == 0 || c == '.' && dot {
			return nil, false
		}
		dot = c == '.'
		buf[i] = c
	}
	return buf[:len(h)], !dot
}

// requestHostBytes maps each byte a request's Host may have to its lower
// case, and the others to 0.
var requestHostBytes = func() (bytes [256]byte) {
	for i := range len(bytes) {
		switch c := byte(i); {
		case hostByte(c) || c == '.':
			bytes[i] = c
		case 'A' <= c && c <= 'Z':
			bytes[i] = c + 'a' - 'A'
		}
	}
	return bytes
}()

// hostByte reports whether c may stand in a lower-case label.
func hostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}

// digits reports whether s is all ASCII digits (or empty).
func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
