package eventstore

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
)

// Attribute returns a CloudEvent attribute or extension of a stored event,
// "" when absent.
func Attribute(h nats.Header, name string) string { return first(h, HeaderPrefix+name) }

// first is the first value of a header, "" when none.
func first(h nats.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// RouteSource returns the source a stored event is routed and matched by:
// HeaderRouteSource when set, else its ce-source.
func RouteSource(h nats.Header) string {
	if v := h[HeaderRouteSource]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return Attribute(h, "source")
}

// CopyToHTTP writes the stored event's headers into an HTTP request header
// as a binary-mode CloudEvent: every ce-* attribute, Content-Type and the
// trace context (traceparent, tracestate, baggage). JetStream's own headers
// (Nats-*) are not copied.
func CopyToHTTP(dst http.Header, src nats.Header) {
	for k, v := range src {
		if len(v) == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(k, HeaderPrefix):
			dst[canonical(k)] = v[:1:1]
		case k == HeaderContentType:
			dst["Content-Type"] = v[:1:1]
		case k == HeaderTraceParent:
			dst["Traceparent"] = v[:1:1]
		case k == HeaderTraceState:
			dst["Tracestate"] = v[:1:1]
		case k == HeaderBaggage:
			dst["Baggage"] = v[:1:1]
		}
	}
}

var canonicalNames = func() map[string]string {
	m := map[string]string{}
	for _, a := range []string{"specversion", "id", "source", "type", "subject", "time", "dataschema", HopsExtension, "eventtypeversion"} {
		m[HeaderPrefix+a] = textproto.CanonicalMIMEHeaderKey(HeaderPrefix + a)
	}
	return m
}()

func canonical(k string) string {
	if c, ok := canonicalNames[k]; ok {
		return c
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}

// Decode parses a stored event back into a CloudEvent. The error wraps
// ErrInvalidEvent.
func Decode(h nats.Header, data []byte) (*event.Event, error) {
	hh := make(http.Header, len(h))
	CopyToHTTP(hh, h)
	msg := cehttp.NewMessage(hh, nil)
	e, err := binding.ToEvent(context.Background(), msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if len(data) > 0 {
		e.DataEncoded = data
	}
	return e, nil
}

// Hops returns the value of the hop-counter extension, 0 when absent or
// not a non-negative integer.
func Hops(h nats.Header) int {
	n, err := strconv.Atoi(Attribute(h, HopsExtension))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
