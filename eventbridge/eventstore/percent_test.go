package eventstore_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

func TestPercentEncode(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"nothing to encode":         {"order.payment*success.v1", "order.payment*success.v1"},
		"the specification's own":   {"Euro \u20ac \U0001F600", "Euro%20%E2%82%AC%20%F0%9F%98%80"},
		"percent, so %41 stays %41": {"%41", "%2541"},
		"double quote":              {`say "hi"`, "say%20%22hi%22"},
		"non-ASCII":                 {"créé", "cr%C3%A9%C3%A9"},
		"control and DEL":           {"a\x01b\x7f", "a%01b%7F"},
		"printable ASCII stays":     {"!#$&'()*+,/:;<=>?@[\\]^_`{|}~", "!#$&'()*+,/:;<=>?@[\\]^_`{|}~"},
		"empty":                     {"", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := eventstore.PercentEncode(tt.in)
			assert.Equal(t, tt.want, got)
			back, err := url.PathUnescape(got)
			require.NoError(t, err)
			assert.Equal(t, tt.in, back, "one round of percent-decoding gives the value back")
		})
	}
}

func TestCopyToWireEncodesOnlyAttributes(t *testing.T) {
	src := nats.Header{
		"ce-id":        {"1"},
		"ce-source":    {"my app"},
		"ce-type":      {"order.created.v1"},
		"ce-myext":     {`%41 "q" é`},
		"Content-Type": {`text/plain; charset="utf-8"`},
		"traceparent":  {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	dst := http.Header{}
	eventstore.CopyToWire(dst, src)
	assert.Equal(t, "my%20app", dst.Get("Ce-Source"))
	assert.Equal(t, "%2541%20%22q%22%20%C3%A9", dst.Get("Ce-Myext"))
	assert.Equal(t, "order.created.v1", dst.Get("Ce-Type"))
	assert.Equal(t, `text/plain; charset="utf-8"`, dst.Get("Content-Type"), "not an attribute header: HTTP's own syntax")
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", dst.Get("Traceparent"))
}
