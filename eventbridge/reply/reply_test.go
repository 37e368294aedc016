package reply_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/reply"
)

func binaryReply(modify ...func(http.Header)) http.Header {
	h := http.Header{}
	h.Set("Ce-Specversion", "1.0")
	h.Set("Ce-Id", "r1")
	h.Set("Ce-Source", "enricher")
	h.Set("Ce-Type", "order.enriched.v1")
	h.Set("Content-Type", "application/json")
	for _, m := range modify {
		m(h)
	}
	return h
}

func TestIsCloudEvent(t *testing.T) {
	tests := map[string]struct {
		header http.Header
		want   bool
	}{
		"binary mode":     {binaryReply(), true},
		"structured mode": {http.Header{"Content-Type": {"application/cloudevents+json; charset=utf-8"}}, true},
		"plain JSON":      {http.Header{"Content-Type": {"application/json"}}, false},
		"no headers":      {http.Header{}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tt.want, reply.IsCloudEvent(tt.header)) })
	}
}

func TestReadKeepsToItsBound(t *testing.T) {
	b, err := reply.Read(strings.NewReader("12345"), 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))
	_, err = reply.Read(strings.NewReader("123456"), 5)
	require.ErrorIs(t, err, reply.ErrInvalid, "one byte over the bound")
}

// A reply is one hop further than the event it answers; one that is not a
// valid CloudEvent is ErrInvalid.
func TestDecode(t *testing.T) {
	answered := nats.Header{eventstore.HeaderPrefix + eventstore.HopsExtension: {"3"}}
	r, err := reply.Decode(context.Background(), binaryReply(), []byte(`{"ok":true}`), answered)
	require.NoError(t, err)
	assert.Equal(t, 4, r.Hops)
	assert.Equal(t, "r1", r.Event.ID())
	assert.Equal(t, "order.enriched.v1", r.Event.Type())

	r, err = reply.Decode(context.Background(), binaryReply(), nil, nats.Header{})
	require.NoError(t, err)
	assert.Equal(t, 1, r.Hops, "an event without hops answered: the reply's first hop")

	_, err = reply.Decode(context.Background(), binaryReply(func(h http.Header) { h.Del("Ce-Type") }), nil, answered)
	require.True(t, errors.Is(err, reply.ErrInvalid), "a reply without a type: %v", err)
}
