package eventstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

func attrs(extra map[string]string) nats.Header {
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"1"}, "ce-source": {"shop"}, "ce-type": {"a.b"}}
	for k, v := range extra {
		h[k] = []string{v}
	}
	return h
}

// putNew stores a new event whose stored form is h and data, routed by
// route.
func putNew(ctx context.Context, s *eventstore.Store, h nats.Header, data []byte, route string) (eventstore.Result, error) {
	e := eventstore.FromHeader(h, data)
	e.SetRoute(route)
	return s.Put(ctx, e)
}

func TestCheckAttributes(t *testing.T) {
	many := map[string]string{}
	for i := range eventstore.MaxAttributes - 4 {
		many[fmt.Sprintf("ce-x%d", i)] = "v"
	}
	tests := map[string]struct {
		h    nats.Header
		want error
	}{
		"ordinary":                              {attrs(nil), nil},
		"longest id":                            {attrs(map[string]string{"ce-id": strings.Repeat("i", eventstore.MaxIDLength)}), nil},
		"id too long":                           {attrs(map[string]string{"ce-id": strings.Repeat("i", eventstore.MaxIDLength+1)}), eventstore.ErrInvalidEvent},
		"longest name":                          {attrs(map[string]string{"ce-" + strings.Repeat("n", eventstore.MaxExtensionNameLength): "v"}), nil},
		"name too long":                         {attrs(map[string]string{"ce-" + strings.Repeat("n", eventstore.MaxExtensionNameLength+1): "v"}), eventstore.ErrInvalidEvent},
		"most attributes":                       {attrs(many), nil},
		"one too many":                          {attrs(map[string]string{"ce-x999": "v", "Content-Type": "text/plain"}), nil},
		"too many":                              {func() nats.Header { h := attrs(many); h["Content-Type"] = []string{"text/plain"}; return h }(), eventstore.ErrTooLarge},
		"too many bytes":                        {attrs(map[string]string{"ce-big": strings.Repeat("x", eventstore.MaxAttributeBytes)}), eventstore.ErrTooLarge},
		"trace not counted":                     {attrs(map[string]string{eventstore.HeaderBaggage: strings.Repeat("b", eventstore.MaxAttributeBytes)}), nil},
		"bytes as they travel, percent-encoded": {attrs(map[string]string{"ce-big": strings.Repeat("%", eventstore.MaxAttributeBytes/3)}), eventstore.ErrTooLarge},
		"non-ASCII within the bound":            {attrs(map[string]string{"ce-big": strings.Repeat("é", eventstore.MaxAttributeBytes/8)}), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := eventstore.CheckAttributes(tc.h)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.want)
			}
		})
	}
}

func TestTraceContextOverItsBoundIsNotStored(t *testing.T) {
	long := "00-" + strings.Repeat("a", eventstore.MaxTraceParentLength)
	e, err := eventstore.Encode(newEvent(), long, "k=v")
	require.NoError(t, err)
	assert.Empty(t, e.Header()[eventstore.HeaderTraceParent])
	assert.Empty(t, e.Header()[eventstore.HeaderTraceState], "no state without its parent")

	e, err = eventstore.Encode(newEvent(), "00-trace-01", strings.Repeat("s", eventstore.MaxTraceStateLength+1))
	require.NoError(t, err)
	assert.Equal(t, []string{"00-trace-01"}, e.Header()[eventstore.HeaderTraceParent])
	assert.Empty(t, e.Header()[eventstore.HeaderTraceState])

	req := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"1"}, "Ce-Source": {"s"}, "Ce-Type": {"a.b"}}
	b, ok := eventstore.EncodeBinary(req, nil, long, "")
	require.True(t, ok)
	assert.Empty(t, b.Header()[eventstore.HeaderTraceParent])
}

// TestStoreRefusesWhatWouldCloseTheConnection shows what the bounds guard
// against, on a real NATS server: a message whose subject is over NATS's
// control line makes the server close the connection that sent it. The
// Store refuses such a message before sending it, and headers over
// JetStream's bound, and its connection stays up.
func TestStoreRefusesWhatWouldCloseTheConnection(t *testing.T) {
	ns := natstest.Start(t)
	ctx := context.Background()

	// What happens without the Store's check: the connection is gone.
	raw := ns.Connect()
	closed := make(chan struct{})
	raw.SetClosedHandler(func(*nats.Conn) { close(closed) })
	require.NoError(t, raw.Publish("kyma."+strings.Repeat("a", 5000), nil))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server kept a connection that sent a 5,000-byte subject; the bounds may be needless")
	}

	nc := ns.Connect()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	c := stream.DefaultConfig()
	c.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(ctx, js, c))
	store := eventstore.New(js, c.EventStream)

	_, err = store.Put(ctx, eventstore.Restore(&nats.Msg{Subject: "kyma." + strings.Repeat("a", eventstore.MaxSubjectLength), Header: attrs(nil)}, "m1"))
	require.ErrorIs(t, err, eventstore.ErrInvalidEvent)
	_, err = store.Put(ctx, eventstore.Restore(&nats.Msg{Subject: "kyma.shop.a.b", Header: attrs(map[string]string{"x-big": strings.Repeat("x", 64<<10)})}, "m2"))
	require.ErrorIs(t, err, eventstore.ErrTooLarge)

	_, err = putNew(ctx, store, attrs(map[string]string{"ce-type": strings.Repeat("a", 5000)}), nil, "")
	require.ErrorIs(t, err, eventstore.ErrInvalidEvent)
	_, err = putNew(ctx, store, attrs(nil), nil, strings.Repeat("r", 5000))
	require.ErrorIs(t, err, eventstore.ErrInvalidEvent, "a route source is bounded as a source")

	res, err := putNew(ctx, store, attrs(nil), []byte("{}"), "")
	require.NoError(t, err, "the connection is still there")
	assert.Equal(t, uint64(1), res.Sequence)
	assert.True(t, nc.IsConnected())
}

// TestLargestEventIsStoredAndDeadLettered stores the largest event the
// bounds let through, with the longest trace context, baggage and route
// source, and then its dead letter with the longest failure: the budget
// of the bounds fits JetStream's header bound at each step.
func TestLargestEventIsStoredAndDeadLettered(t *testing.T) {
	ns := natstest.Start(t)
	ctx := context.Background()
	js := ns.JetStream()
	c := stream.DefaultConfig()
	c.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(ctx, js, c))
	// The event stream keeps events while a consumer is interested.
	_, err := js.CreateOrUpdateConsumer(ctx, c.EventStream, jetstream.ConsumerConfig{Durable: "probe", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)

	source := strings.Repeat("s", v1alpha2.MaxEventSourceLength)
	h := nats.Header{
		"ce-specversion": {"1.0"},
		"ce-id":          {strings.Repeat("i", eventstore.MaxIDLength)},
		"ce-source":      {source},
		"ce-type":        {strings.Repeat("t", v1alpha2.MaxEventTypeLength)},
	}
	size := 0
	for k, v := range h {
		size += len(k) + len(v[0]) + 4
	}
	h["ce-fill"] = []string{strings.Repeat("f", eventstore.MaxAttributeBytes-size-len("ce-fill")-4)}
	require.NoError(t, eventstore.CheckAttributes(h))
	h[eventstore.HeaderTraceParent] = []string{strings.Repeat("p", eventstore.MaxTraceParentLength)}
	h[eventstore.HeaderTraceState] = []string{strings.Repeat("s", eventstore.MaxTraceStateLength)}
	var member baggage.Member
	member, err = baggage.NewMemberRaw("k", strings.Repeat("b", eventstore.MaxBaggageLength-2))
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	route := strings.Repeat("r", v1alpha2.MaxEventSourceLength)

	res, err := putNew(baggage.ContextWithBaggage(ctx, bag), eventstore.New(js, c.EventStream), h, []byte("{}"), route)
	require.NoError(t, err)
	events, err := js.Stream(ctx, c.EventStream)
	require.NoError(t, err)
	msg, err := events.GetMsg(ctx, res.Sequence)
	require.NoError(t, err)
	assert.Len(t, msg.Header.Get(eventstore.HeaderBaggage), eventstore.MaxBaggageLength, "the baggage was stored")

	f := deadletter.Failure{Namespace: strings.Repeat("n", 63), Subscription: strings.Repeat("s", 253),
		Error: strings.Repeat("e", 10000), Subject: msg.Subject, Sequence: res.Sequence, Attempts: 10, Status: 500, At: time.Now()}
	_, err = eventstore.New(js, c.DeadLetterStream).Put(ctx, eventstore.Restore(deadletter.NewMsg(msg.Header, msg.Data, f), deadletter.MsgID(f)))
	require.NoError(t, err, "the largest event's dead letter is stored")
}
