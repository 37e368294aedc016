package eventstore_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

func TestMsgIDIsUnambiguous(t *testing.T) {
	assert.NotEqual(t, eventstore.MsgID("", "a", "bc"), eventstore.MsgID("", "ab", "c"))
	assert.Equal(t, eventstore.MsgID("", "shop", "1"), eventstore.MsgID("", "shop", "1"))
	assert.Equal(t, "4:shop1", eventstore.MsgID("", "shop", "1"), "without a sender, as before senders scoped it")
	ids := map[string][3]string{}
	for _, k := range [][3]string{
		{"", "shop", "1"}, {"a", "shop", "1"}, {"b", "shop", "1"}, {"12", "shop", "1"},
		{"", "12/4:shop", "1"}, {"", "4", ":shop1"}, {"a", "4", ":shop1"}, {"1", "2", "/4:shop1"},
	} {
		id := eventstore.MsgID(k[0], k[1], k[2])
		assert.NotContains(t, ids, id, "%q and %q", k, ids[id])
		ids[id] = k
	}
}

func newEvent() *event.Event {
	e := event.New()
	e.SetID("1")
	e.SetSource("/shop")
	e.SetType("order.created.v1")
	e.SetSubject("order-7")
	e.SetTime(time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC))
	e.SetExtension("tenant", "acme")
	e.SetExtension(eventstore.HopsExtension, 2)
	_ = e.SetData("application/json", map[string]int{"n": 1})
	return &e
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	e := newEvent()
	stored, err := eventstore.Encode(e, "00-trace-01", "k=v")
	require.NoError(t, err)
	h, data := stored.Header(), stored.Data()
	assert.Equal(t, "order-7", h.Get("ce-subject"))
	assert.Equal(t, "acme", h.Get("ce-tenant"))
	assert.Equal(t, "application/json", h.Get(eventstore.HeaderContentType))
	assert.Equal(t, "00-trace-01", h.Get(eventstore.HeaderTraceParent))
	assert.Equal(t, "k=v", h.Get(eventstore.HeaderTraceState))
	assert.Equal(t, 2, eventstore.Hops(h))

	got, err := eventstore.Decode(h, data)
	require.NoError(t, err)
	assert.Equal(t, e.ID(), got.ID())
	assert.Equal(t, e.Source(), got.Source())
	assert.Equal(t, e.Type(), got.Type())
	assert.Equal(t, e.Subject(), got.Subject())
	assert.True(t, e.Time().Equal(got.Time()))
	assert.Equal(t, "acme", got.Extensions()["tenant"])
	assert.JSONEq(t, `{"n":1}`, string(got.Data()))

	hh := http.Header{}
	eventstore.CopyToHTTP(hh, nats.Header{"ce-id": {"1"}, "Nats-Msg-Id": {"x"}, "Content-Type": {"text/plain"}, "traceparent": {"t"}, "other": {"y"}})
	assert.Equal(t, http.Header{"Ce-Id": {"1"}, "Content-Type": {"text/plain"}, "Traceparent": {"t"}}, hh)
}

func TestEncodeKeepsAnEventsOwnTraceParent(t *testing.T) {
	e := newEvent()
	e.SetExtension("traceparent", "00-own-01")
	stored, err := eventstore.Encode(e, "00-request-01", "")
	require.NoError(t, err)
	h := stored.Header()
	assert.Equal(t, "00-own-01", h.Get("ce-traceparent"))
	assert.Empty(t, h.Get(eventstore.HeaderTraceParent))
}

func TestEncodeRefuses(t *testing.T) {
	tests := map[string]func(*event.Event){
		"no id":              func(e *event.Event) { e.SetID("") },
		"control in subject": func(e *event.Event) { e.SetSubject("a\r\nInjected: yes") },
		"control in ext":     func(e *event.Event) { e.SetExtension("x", "a\x00b") },
	}
	for name, modify := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEvent()
			modify(e)
			_, err := eventstore.Encode(e, "", "")
			require.ErrorIs(t, err, eventstore.ErrInvalidEvent)
		})
	}
}

func TestHops(t *testing.T) {
	for in, want := range map[string]int{"": 0, "3": 3, "-1": 0, "x": 0} {
		assert.Equal(t, want, eventstore.Hops(nats.Header{"ce-kfnhops": {in}}), in)
	}
}

func TestClassify(t *testing.T) {
	tests := map[string]struct {
		err  error
		want error
	}{
		"max payload":   {nats.ErrMaxPayload, eventstore.ErrTooLarge},
		"msg too large": {&jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}, eventstore.ErrTooLarge},
		"bytes full":    {&jetstream.APIError{ErrorCode: 10077, Description: "maximum bytes exceeded"}, eventstore.ErrStorageFull},
		"msgs full":     {&jetstream.APIError{ErrorCode: 10077, Description: "maximum messages exceeded"}, eventstore.ErrStorageFull},
		"no resources":  {&jetstream.APIError{ErrorCode: 10023}, eventstore.ErrStorageFull},
		"other store":   {&jetstream.APIError{ErrorCode: 10077, Description: "disk error"}, eventstore.ErrUnavailable},
		"no responders": {jetstream.ErrNoStreamResponse, eventstore.ErrUnavailable},
		"timeout":       {fmt.Errorf("wrapped: %w", errors.New("context deadline exceeded")), eventstore.ErrUnavailable},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := eventstore.Classify(tt.err)
			require.ErrorIs(t, got, tt.want)
			require.ErrorIs(t, got, tt.err, "the cause stays visible")
		})
	}
}
