package eventstore_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// sdkEncode is the full path of a binary-mode request: sdk-go reads the
// event, validates it, and Encode stores it.
func sdkEncode(h http.Header, traceParent, traceState string) (nats.Header, error) {
	e, err := binding.ToEvent(context.Background(), cehttp.NewMessage(h, nil))
	if err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	stored, err := eventstore.Encode(e, traceParent, traceState)
	return stored.Header(), err
}

// encodeBinary is EncodeBinary's stored headers.
func encodeBinary(h http.Header, traceParent, traceState string) (nats.Header, bool) {
	e, ok := eventstore.EncodeBinary(h, nil, traceParent, traceState)
	return e.Header(), ok
}

func binaryHeader(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = []string{kv[i+1]}
	}
	return h
}

// The events publishers send, Kyma's among them, take the short way, and
// it stores them as the full path does.
func TestEncodeBinaryTakesPlainEvents(t *testing.T) {
	tests := map[string]http.Header{
		"minimal": binaryHeader("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "shop", "Ce-Type", "order.created.v1"),
		"the benchmark's": binaryHeader("Ce-Specversion", "1.0", "Ce-Id", "42", "Ce-Source", "bench", "Ce-Type", "order.created.v1",
			"Content-Type", "application/octet-stream", "Accept-Encoding", "gzip", "User-Agent", "Go-http-client/1.1"),
		"Kyma's": binaryHeader("Ce-Specversion", "1.0", "Ce-Id", "A234-1234-1234", "Ce-Source", "myapp", "Ce-Type", "sap.kyma.custom.myapp.order.created.v1",
			"Ce-Eventtypeversion", "v1", "Content-Type", "application/json"),
		"all attributes": binaryHeader("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "https://shop.example.com/orders?x=1", "Ce-Type", "order.created.v1",
			"Ce-Subject", "order-1", "Ce-Time", "2026-11-24T10:00:00.5+01:00", "Content-Type", "application/json", "Ce-Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
	}
	for name, h := range tests {
		t.Run(name, func(t *testing.T) {
			const tp, ts = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v"
			got, ok := encodeBinary(h, tp, ts)
			require.True(t, ok, "takes the short way")
			want, err := sdkEncode(h, tp, ts)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// What is not plainly valid goes the full way, which says why it is
// refused or stores it.
func TestEncodeBinaryLeavesTheRest(t *testing.T) {
	plain := func(kv ...string) http.Header {
		h := binaryHeader("Ce-Specversion", "1.0", "Ce-Id", "1", "Ce-Source", "shop", "Ce-Type", "t")
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
				continue
			}
			h[kv[i]] = []string{kv[i+1]}
		}
		return h
	}
	tests := map[string]http.Header{
		"no id":                     plain("Ce-Id", ""),
		"padded id":                 plain("Ce-Id", " 1 "),
		"no source":                 plain("Ce-Source", ""),
		"no type":                   plain("Ce-Type", ""),
		"specversion 0.3":           plain("Ce-Specversion", "0.3"),
		"a dataschema":              plain("Ce-Dataschema", "https://schema.example.com/x"),
		"a media type with charset": plain("Content-Type", "application/json; charset=utf-8"),
		"structured content type":   plain("Content-Type", "application/cloudevents+json"),
		"a control character":       plain("Ce-Subject", "a\r\nInjected: yes"),
		"not ASCII":                 plain("Ce-Subject", "bestellung-ä"),
		"a bad time":                plain("Ce-Time", "yesterday"),
		"an extension named id":     plain("Ce-ID", "2"),
		"a lower-case header":       plain("ce-id", "2"),
		"an extension with a dash":  plain("Ce-My-Ext", "x"),
		"a source that is no URL":   plain("Ce-Source", "http://[::1"),
		"a network-path source":     plain("Ce-Source", "//host/x"),
		"datacontenttype as a ce- ": plain("Ce-Datacontenttype", "text/plain"),
	}
	for name, h := range tests {
		t.Run(name, func(t *testing.T) {
			_, ok := encodeBinary(h, "", "")
			assert.False(t, ok)
		})
	}
}

// FuzzEncodeBinary holds the short way to the full one: whatever it
// takes, sdk-go takes too, and both store it alike.
func FuzzEncodeBinary(f *testing.F) {
	f.Add("1.0", "1", "shop", "order.created.v1", "", "", "application/json", "Eventtypeversion", "v1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false)
	f.Add("1.0", "a-b", "https://x.example/y?z#w", "t", "s", "2026-01-02T03:04:05Z", "text/plain", "Traceparent", "00-x-y-01", "", false)
	f.Add("1.0", "1", "a b", "t", " ", "0001-01-01T00:00:00Z", "a/b+c", "Kfnhops", "3", "", true)
	f.Add("1.0", "1", "HTTP://Host:80/%7e", "t", "", "2026-01-02T03:04:05.123456789-07:00", "x/y", "A1", "", "tp", false)
	f.Fuzz(func(t *testing.T, spec, id, source, typ, subject, tm, ct, ext, extValue, traceParent string, lower bool) {
		h := http.Header{}
		for k, v := range map[string]string{"Ce-Specversion": spec, "Ce-Id": id, "Ce-Source": source, "Ce-Type": typ,
			"Ce-Subject": subject, "Ce-Time": tm, "Content-Type": ct, "Ce-" + ext: extValue} {
			if v == "" && k != "Ce-Subject" {
				continue
			}
			h[k] = []string{v}
		}
		if lower {
			h["ce-type"] = []string{typ}
		}
		got, ok := encodeBinary(h, traceParent, "ts")
		if !ok {
			return
		}
		want, err := sdkEncode(h, traceParent, "ts")
		if err != nil {
			t.Fatalf("taken the short way, refused by sdk-go: %v (%v)", err, h)
		}
		if !assert.Equal(t, want, got) {
			t.Fatalf("stored otherwise than sdk-go's: %v", h)
		}
	})
}
