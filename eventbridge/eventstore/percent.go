package eventstore

import (
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
)

// CopyToWire is CopyToHTTP for a request that leaves the event bridge: the
// value of every ce-* header is percent-encoded as the CloudEvents HTTP
// binding asks of a sender in binary mode (PercentEncode), so that a
// receiver that decodes, as the binding asks of it, reads the attribute
// as it was published. Content-Type and the trace context are copied as
// they are.
func CopyToWire(dst http.Header, src nats.Header) {
	CopyToHTTP(dst, src)
	for k, v := range dst {
		if len(v) == 1 && len(k) > len(HeaderPrefix) && strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix) {
			if e := PercentEncode(v[0]); e != v[0] {
				dst[k] = []string{e}
			}
		}
	}
}

// PercentEncode returns an attribute value as the CloudEvents HTTP
// binding (version 1.0.2, section 3.1.3.2) writes it in a header: space,
// double quote, percent and every byte outside printable ASCII (the
// UTF-8 bytes of other characters, and control characters) as %XY with
// upper-case hex digits; everything else as it is. A value with nothing
// to encode is returned as it is, without allocating.
func PercentEncode(s string) string {
	n := encoded(s)
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEncode(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// encoded is the number of bytes of s that PercentEncode writes as %XY:
// its result is len(s) + 2*encoded(s) bytes long.
func encoded(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEncode(s[i]) {
			n++
		}
	}
	return n
}

// mustEncode reports whether a byte of a header value is percent-encoded.
func mustEncode(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '"' || c == '%'
}
