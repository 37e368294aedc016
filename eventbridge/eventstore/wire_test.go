package eventstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/reply"
	"github.com/kfn-dev/kfn/test/natstest"
)

var update = flag.Bool("update", false, "write testdata/wire.golden.json anew")

// wireMsg is a message as it reaches NATS: what the dispatcher, and the
// releases before this one, read back.
type wireMsg struct {
	Case    string              `json:"case"`
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header"`
	Data    string              `json:"data"`
}

// recorder plays JetStream on a real NATS server: it keeps every message
// published and answers it as stored.
type recorder struct {
	mu   sync.Mutex
	msgs []wireMsg
	js   jetstream.JetStream
}

func newRecorder(t *testing.T) *recorder {
	srv := natstest.Start(t)
	nc := srv.Connect()
	r := &recorder{}
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		if strings.HasPrefix(m.Subject, "_INBOX.") {
			return
		}
		r.mu.Lock()
		r.msgs = append(r.msgs, wireMsg{Subject: m.Subject, Header: m.Header, Data: string(m.Data)})
		r.mu.Unlock()
		// As the streams of the cases would: dead letters in theirs,
		// every other event in the event stream.
		into := "events"
		if strings.HasPrefix(m.Subject, "kfn.deadletter.") {
			into = "dead-letters"
		}
		_ = m.Respond([]byte(`{"stream":"` + into + `","seq":1}`))
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	r.js, err = jetstream.New(srv.Connect())
	require.NoError(t, err)
	return r
}

// take returns the messages published since the last take, named name.
func (r *recorder) take(t *testing.T, name string, want int) []wireMsg {
	t.Helper()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.msgs) >= want
	}, 5*time.Second, time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.msgs
	r.msgs = nil
	require.Len(t, out, want, name)
	for i := range out {
		out[i].Case = name
	}
	return out
}

type senderTokens map[string]string

func (s senderTokens) SenderNamespace(r *http.Request) (string, error) {
	return s[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")], nil
}

type appTypes map[string]string

func (a appTypes) TypeOrName(name string) (string, bool) {
	t, ok := a[name]
	return t, ok
}

// plainBinary is a binary-mode request's header that EncodeBinary takes.
func plainBinary() http.Header {
	return binaryHeader("Ce-Specversion", "1.0", "Ce-Id", "b-1", "Ce-Source", "/shop", "Ce-Type", "order.created.v1",
		"Ce-Time", "2026-01-02T03:04:05.5Z", "Ce-Subject", "order-7", "Ce-Tenant", "acme", "Content-Type", "application/json")
}

// wireEvent is the event of the store's cases: every kind of attribute.
func wireEvent() *event.Event {
	e := newEvent()
	e.SetDataSchema("https://example.com/schema")
	e.SetExtension("weird", "a b%\"c")
	return e
}

// TestStoredFormOnTheWire holds every path that stores an event to the
// stored form it wrote before the event store had one entry point, Put
// (testdata/wire.golden.json, written with -update before): the dispatcher and
// older releases (an upgrade) read these headers.
func TestStoredFormOnTheWire(t *testing.T) {
	r := newRecorder(t)
	ctx := t.Context()
	var got []wireMsg
	got = append(got, storeCases(t, ctx, r)...)
	got = append(got, publisherCases(t, r)...)

	b, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	golden := "testdata/wire.golden.json"
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, append(b, '\n'), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(b))
}

func storeCases(t *testing.T, ctx context.Context, r *recorder) []wireMsg {
	var got []wireMsg
	store := eventstore.New(r.js, "events")

	e, err := eventstore.Encode(wireEvent(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v")
	require.NoError(t, err)
	_, err = store.Put(ctx, e)
	require.NoError(t, err)
	got = append(got, r.take(t, "store: an event", 1)...)

	bag, err := baggage.Parse("user=alice")
	require.NoError(t, err)
	e, err = eventstore.Encode(wireEvent(), "", "")
	require.NoError(t, err)
	e.SetRoute("commerce")
	_, err = store.Put(baggage.ContextWithBaggage(ctx, bag), e)
	require.NoError(t, err)
	got = append(got, r.take(t, "store: routed, with baggage", 1)...)

	e, ok := eventstore.EncodeBinary(plainBinary(), []byte(`{"n":1}`), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "")
	require.True(t, ok)
	e.SetRoute("/shop")
	_, err = store.Put(ctx, e)
	require.NoError(t, err)
	got = append(got, r.take(t, "store: binary, routed by its own source", 1)...)

	replies := reply.NewStore(r.js, stream.Config{EventStream: "events"}, admission.Policy{}, nil)
	res, err := replies.Publish(ctx, &reply.Reply{Event: wireEvent(), Hops: 3}, "team-a", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "")
	require.NoError(t, err)
	require.Equal(t, reply.Published, res)
	got = append(got, r.take(t, "reply", 1)...)

	stored := got[0]
	f := deadletter.Failure{Namespace: "shop", Subscription: "orders", Status: 500, Error: "boom\nagain", Attempts: 3,
		Subject: stored.Subject, Sequence: 7, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	letter := deadletter.NewMsg(nats.Header(stored.Header), []byte(stored.Data), f)
	_, err = eventstore.New(r.js, "dead-letters").Put(ctx, eventstore.Restore(letter, deadletter.MsgID(f)))
	require.NoError(t, err)
	got = append(got, r.take(t, "dead letter", 1)...)

	h := nats.Header{}
	for k, v := range letter.Header {
		if !strings.HasPrefix(k, "Kfn-") && !strings.HasPrefix(k, "Nats-") {
			h[k] = v
		}
	}
	replayed := &nats.Msg{Subject: stream.ReplaySubject(stream.ConsumerName("shop", "orders")), Header: h, Data: letter.Data}
	_, err = store.Put(ctx, eventstore.Restore(replayed, "replay:dead-letters:7"))
	require.NoError(t, err)
	got = append(got, r.take(t, "replay", 1)...)
	return got
}

func publisherCases(t *testing.T, r *recorder) []wireMsg {
	var got []wireMsg
	p, err := publisher.New(eventstore.New(r.js, "events"), publisher.Config{},
		publisher.WithSenders(senderTokens{"a": "team-a"}), publisher.WithApplications(appTypes{"bank-eu": "bank", "shop": "shop"}))
	require.NoError(t, err)
	post := func(name, path string, h http.Header, body string, events int) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewBufferString(body))
		for k, v := range h {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		require.Less(t, w.Code, 300, "%s: %s", name, w.Body)
		got = append(got, r.take(t, name, events)...)
	}
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	h := plainBinary()
	h.Set("Traceparent", tp)
	h.Set("Tracestate", "k=v")
	post("publisher: binary, plain", "/publish", h, `{"n":1}`, 1)

	h = plainBinary()
	h.Set("Authorization", "Bearer a")
	h.Set("Ce-Source", "bank-eu")
	h.Set("Ce-Kfnhops", "04")
	post("publisher: binary, a sender, an Application's source", "/publish", h, `{"n":1}`, 1)

	h = plainBinary()
	h.Set("Ce-Weird", "a b")
	h.Set("Ce-Dataschema", "https://example.com/schema")
	post("publisher: binary, through sdk-go", "/publish", h, `{"n":1}`, 1)

	h = plainBinary()
	h.Set("Ce-Type", "sap.kyma.custom.bank-eu.order.created.v1")
	post("publisher: binary, a legacy type", "/publish", h, `{"n":1}`, 1)

	h = http.Header{"Content-Type": {"application/cloudevents+json"}}
	post("publisher: structured", "/shop/v2/events", h,
		`{"specversion":"1.0","id":"s1","source":"shop","type":"order.created.v1","time":"2026-01-02T03:04:05Z","tenant":"acme","datacontenttype":"application/json","data":{"n":1}}`, 1)

	h = http.Header{"Content-Type": {"application/cloudevents-batch+json"}, "Authorization": {"Bearer a"}}
	post("publisher: batch", "/publish", h,
		`[{"specversion":"1.0","id":"b1","source":"shop","type":"order.created.v1","data":"x"},{"specversion":"1.0","id":"b2","source":"bank-eu","type":"order.paid.v1","kfnhops":1}]`, 2)

	h = http.Header{"Content-Type": {"application/json"}, "Traceparent": {tp}}
	post("publisher: legacy", "/bank-eu/v1/events", h,
		`{"event-type":"order.created","event-type-version":"v1","event-id":"8954ad1c-78ed-4c58-a639-68bd44031de0","event-time":"2026-01-02T03:04:05Z","data":{"n":1}}`, 2)
	return got
}
