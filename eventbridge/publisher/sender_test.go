package publisher_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/auth"
)

// tokens stands in for the cluster's TokenReview, which
// eventbridge's TestRunInACluster exercises with real ServiceAccount
// tokens: here the publisher's use of the answer is under test.
type tokens map[string]string

func (k tokens) SenderNamespace(r *http.Request) (string, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", nil
	}
	ns, known := k[token]
	if !known {
		return "", fmt.Errorf("%w: unknown token", auth.ErrUnauthenticated)
	}
	return ns, nil
}

// TestEveryPublishNamesItsSender publishes in every mode (binary,
// structured, batch, legacy) with a ServiceAccount's token, a user's
// (no namespace) and none: the stored events carry the sender's namespace
// in kfnsendernamespace only for the first; an unknown token is 401 and
// stores nothing; an event that names a sender itself is refused (400),
// with or without Senders.
func TestEveryPublishNamesItsSender(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil, publisher.WithSenders(tokens{"sa-token": "team-a", "user-token": ""}))
	const header = "ce-" + publisher.SenderExtension
	structured := `{"specversion":"1.0","id":"s1","source":"shop","type":"order.paid.v1","data":{}}`
	batch := `[{"specversion":"1.0","id":"b1","source":"shop","type":"order.paid.v1"},{"specversion":"1.0","id":"b2","source":"shop","type":"order.paid.v1"}]`
	publishAll := func(auth string) {
		t.Helper()
		with := func(h map[string]string) map[string]string {
			if auth != "" {
				h["Authorization"] = auth
			}
			return h
		}
		for _, req := range []struct {
			path, body string
			header     map[string]string
		}{
			{"/publish", "{}", binary("bin-"+auth, "order.created.v1")},
			{"/publish", strings.Replace(structured, `"s1"`, `"s1`+auth+`"`, 1), map[string]string{"Content-Type": "application/cloudevents+json"}},
			{"/publish", strings.ReplaceAll(batch, `"b`, `"b`+auth), map[string]string{"Content-Type": "application/cloudevents-batch+json"}},
			{"/commerce/v1/events", `{"event-type":"order.created","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{}}`, map[string]string{"Content-Type": "application/json"}},
		} {
			code, body, _ := e.post(t, req.path, with(req.header), req.body)
			require.Less(t, code, 300, "%s with %q: %s", req.path, auth, body)
		}
	}
	const perRound = 6 // binary, structured, two of the batch, the legacy event stored twice
	publishAll("Bearer sa-token")
	for _, s := range e.stored(t, perRound) {
		assert.Equal(t, []string{"team-a"}, s.Header[header], s.Subject)
	}
	publishAll("Bearer user-token")
	for _, s := range e.stored(t, perRound) {
		assert.NotContains(t, s.Header, header, "a user is no namespace's: %s", s.Subject)
	}
	publishAll("")
	for _, s := range e.stored(t, perRound) {
		assert.NotContains(t, s.Header, header, "no token, no sender: %s", s.Subject)
	}

	for _, path := range []string{"/publish", "/commerce/v1/events"} {
		h := binary("unknown", "order.created.v1")
		h["Authorization"] = "Bearer made-up"
		code, body, _ := e.post(t, path, h, `{"event-type":"order.created","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{}}`)
		assert.Equal(t, http.StatusUnauthorized, code, "%s: %s", path, body)
	}
	e.stored(t, 0)

	plain := newEnv(t, publisher.Config{}, nil)
	for _, env := range []*env{e, plain} {
		forged := binary("forged", "order.created.v1")
		forged["Ce-"+publisher.SenderExtension] = "team-b"
		code, body, _ := env.post(t, "/publish", forged, "{}")
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, body, "set by kfn's event bridge only")
		code, body, _ = env.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents+json"},
			`{"specversion":"1.0","id":"f2","source":"shop","type":"order.paid.v1","`+publisher.SenderExtension+`":"team-b"}`)
		assert.Equal(t, http.StatusBadRequest, code, body)
		env.stored(t, 0)
	}
}

// TestReservedSources keeps source bank for team-a's senders and the
// refunds of source shop for team-b's: each is taken from its namespace,
// refused from another (403 naming both) and without a sender (401), in
// binary, structured and legacy mode; what no reservation names is taken
// from anyone.
func TestReservedSources(t *testing.T) {
	cfg := publisher.Config{Reserved: []admission.Reservation{
		{Source: "bank", Namespaces: []string{"team-a"}},
		{Source: "shop", TypePrefix: "order.refund", Namespaces: []string{"team-b"}},
	}}
	e := newEnv(t, cfg, nil, publisher.WithSenders(tokens{"a": "team-a", "b": "team-b"}),
		publisher.WithApplications(applicationLabels{"bank-eu": {"Application-Type": "bank"}}))
	n := 0
	send := func(source, typ, token string) (int, string) {
		t.Helper()
		n++
		h := binary(fmt.Sprint("r", n), typ)
		h["Ce-Source"] = source
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		code, body, _ := e.post(t, "/publish", h, "{}")
		return code, body
	}
	structured := func(source, typ, token string) int {
		t.Helper()
		n++
		h := map[string]string{"Content-Type": "application/cloudevents+json"}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		code, _, _ := e.post(t, "/publish", h, fmt.Sprintf(`{"specversion":"1.0","id":"s%d","source":%q,"type":%q}`, n, source, typ))
		return code
	}
	legacy := func(app, token string) int {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json"}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		code, _, _ := e.post(t, "/"+app+"/v1/events", h, `{"event-type":"account.opened","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{}}`)
		return code
	}

	code, body := send("bank", "account.opened.v1", "b")
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "reserved to namespaces team-a, not team-b")
	code, body = send("bank", "account.opened.v1", "")
	assert.Equal(t, http.StatusUnauthorized, code, body)
	assert.Equal(t, http.StatusForbidden, structured("bank", "account.opened.v1", "b"))
	assert.Equal(t, http.StatusForbidden, legacy("bank", "b"))
	assert.Equal(t, http.StatusUnauthorized, legacy("bank", ""))
	assert.Equal(t, http.StatusForbidden, structured("shop", "order.refund.v1", "a"), "shop's refunds are team-b's")
	assert.Equal(t, http.StatusForbidden, structured("elsewhere", "sap.kyma.custom.bank.account.opened.v1", "b"),
		"a legacy type names its application: bank's reservation holds")
	assert.Equal(t, http.StatusUnauthorized, structured("elsewhere", "sap.kyma.custom.bank.account.opened.v1", ""))
	code, body = send("bank-eu", "account.opened.v1", "b")
	assert.Equal(t, http.StatusForbidden, code, "an Application of type bank is routed, and reserved, as bank: %s", body)
	e.stored(t, 0)

	code, body = send("bank", "account.opened.v1", "a")
	assert.Equal(t, http.StatusNoContent, code, body)
	assert.Equal(t, http.StatusNoContent, structured("bank", "account.closed.v1", "a"))
	assert.Less(t, legacy("bank", "a"), 300)
	assert.Equal(t, http.StatusNoContent, structured("shop", "order.refund.v1", "b"))
	assert.Equal(t, http.StatusNoContent, structured("elsewhere", "sap.kyma.custom.bank.account.opened.v1", "a"))
	code, body = send("shop", "order.created.v1", "")
	assert.Equal(t, http.StatusNoContent, code, "what no reservation names: anyone, as Kyma: %s", body)
	e.stored(t, 7) // the legacy event is stored twice
}

func TestNewRefusesAnInvalidReservation(t *testing.T) {
	_, err := publisher.New(eventstore.New(nil, "events"), publisher.Config{Reserved: []admission.Reservation{{Source: "bank"}}})
	assert.ErrorIs(t, err, publisher.ErrInvalidOption, "a reservation without namespaces")
}

// TestOneSenderCannotSuppressAnothersEvent: JetStream stores an event once
// per message id within the de-duplication window, so a namespace that
// knows (or predicts) the source and id of another's next event could
// publish it first and have the real one dropped as a duplicate. The
// message id is the sender's namespace with the source and id: a sender's
// own retries are stored once (Kyma's idempotent publish), the same source
// and id from another namespace, or from no namespace, are other events.
func TestOneSenderCannotSuppressAnothersEvent(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil, publisher.WithSenders(tokens{"a": "team-a", "b": "team-b"}))
	send := func(token string) {
		t.Helper()
		h := binary("pay-1", "order.paid.v1")
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		code, body, _ := e.post(t, "/publish", h, "{}")
		require.Equal(t, http.StatusNoContent, code, body)
	}
	send("b") // the attacker, first
	send("a") // the real event
	send("a") // its retry
	send("")  // no sender
	send("")
	got := e.stored(t, 3)
	var senders []string
	for _, s := range got {
		senders = append(senders, strings.Join(s.Header["ce-"+publisher.SenderExtension], ""))
	}
	assert.Equal(t, []string{"team-b", "team-a", ""}, senders)
}

// TestHopLimitHoldsForPublishes: a Function's host sets kfnhops on the
// events it emits to that of the event it handles plus one, and the
// publisher holds them to the hop limit that ends reply chains: past it,
// in every mode, an event is refused (400, naming the limit), so that a
// function emitting the events it receives cannot keep a storm going. A
// kfnhops that is no count of hops is refused too; one within the limit
// is stored as a plain number.
func TestHopLimitHoldsForPublishes(t *testing.T) {
	e := newEnv(t, publisher.Config{MaxHops: 3}, nil)
	publish := func(id, hops string) (int, string) {
		h := binary(id, "order.created.v1")
		h["Ce-Kfnhops"] = hops
		code, body, _ := e.post(t, "/publish", h, "{}")
		return code, body
	}
	for _, hops := range []string{"4", "1000000", "99999999999999999999"} {
		code, body := publish("over-"+hops, hops)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, body, "at most 3", hops)
	}
	for _, hops := range []string{"-1", "x", "1.5"} {
		code, body := publish("bad-"+hops, hops)
		assert.Equal(t, http.StatusBadRequest, code, "%q: %s", hops, body)
	}
	code, _, _ := e.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"s","source":"shop","type":"order.paid.v1","kfnhops":4}`)
	assert.Equal(t, http.StatusBadRequest, code, "structured")
	code, _, _ = e.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents-batch+json"},
		`[{"specversion":"1.0","id":"b1","source":"shop","type":"order.paid.v1"},{"specversion":"1.0","id":"b2","source":"shop","type":"order.paid.v1","kfnhops":"4"}]`)
	assert.Equal(t, http.StatusBadRequest, code, "batch")
	e.stored(t, 0)

	code, body := publish("within", "03")
	require.Equal(t, http.StatusNoContent, code, body)
	assert.Equal(t, []string{"3"}, e.stored(t, 1)[0].Header["ce-kfnhops"])
}

// TestOneSendersFloodLeavesTheOthersTheirRate: a namespace that publishes
// as fast as it can (a flood, or a function emitting what it receives
// with a hop count of its own making) is held to its rate: past its burst
// its requests are refused whole (429, Retry-After), in every mode, while
// another namespace, and publishers without a namespace (who share a
// bucket of their own), still store theirs.
func TestOneSendersFloodLeavesTheOthersTheirRate(t *testing.T) {
	cfg := publisher.Config{SenderRate: 0.001, SenderBurst: 100, AnonymousRate: 0.001, AnonymousBurst: 100}
	e := newEnv(t, cfg, nil, publisher.WithSenders(tokens{"a": "team-a", "b": "team-b"}))
	n := 0
	send := func(token string) int {
		t.Helper()
		n++
		h := binary(fmt.Sprint("e", n), "order.created.v1")
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		code, _, _ := e.post(t, "/publish", h, "{}")
		return code
	}
	for range 100 {
		require.Equal(t, http.StatusNoContent, send("b"))
	}
	code, body, header := e.post(t, "/publish", map[string]string{"Authorization": "Bearer b", "Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"s","source":"shop","type":"order.paid.v1"}`)
	assert.Equal(t, http.StatusTooManyRequests, code, body)
	assert.Contains(t, body, "namespace team-b may store")
	assert.Equal(t, "1", header.Get("Retry-After"))
	code, _, _ = e.post(t, "/commerce/v1/events", map[string]string{"Authorization": "Bearer b", "Content-Type": "application/json"},
		`{"event-type":"order.created","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{}}`)
	assert.Equal(t, http.StatusTooManyRequests, code, "legacy")
	assert.Equal(t, http.StatusNoContent, send("a"), "another namespace")
	assert.Equal(t, http.StatusNoContent, send(""), "no namespace")
	e.stored(t, 102)

	batch := "[" + strings.TrimSuffix(strings.Repeat(`{"specversion":"1.0","id":"b","source":"shop","type":"order.paid.v1"},`, publisher.MaxBatchEvents), ",") + "]"
	code, body, _ = e.post(t, "/publish", map[string]string{"Authorization": "Bearer a", "Content-Type": "application/cloudevents-batch+json"}, batch)
	assert.Equal(t, http.StatusTooManyRequests, code, "a batch past the rate is refused whole: %s", body)
	e.stored(t, 0)
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

// TestOneSendersLargeEventsLeaveTheOthersTheirBytes: a namespace's bytes
// are bounded as its events are (SenderBytesRate, in bursts of the
// largest request): once its 1 MiB burst is spent its next request is
// refused (429, Retry-After, the bound named) before its body is read, a
// body of unknown length after, while another namespace, and publishers
// without one, still store theirs.
func TestOneSendersLargeEventsLeaveTheOthersTheirBytes(t *testing.T) {
	cfg := publisher.Config{SenderRate: 1000, SenderBytesRate: 0.001, MaxRequestBytes: 1 << 20}
	e := newEnv(t, cfg, func(c *stream.Config) { c.MaxMsgSize = 2 << 20 }, publisher.WithSenders(tokens{"a": "team-a", "b": "team-b"}))
	data := `"` + strings.Repeat("x", 600<<10) + `"`
	send := func(token, id string) (int, string, http.Header) {
		t.Helper()
		h := binary(id, "order.created.v1")
		h["Authorization"] = "Bearer " + token
		return e.post(t, "/publish", h, data)
	}
	code, body, _ := send("b", "b1")
	require.Equal(t, http.StatusNoContent, code, body)
	code, body, header := send("b", "b2")
	assert.Equal(t, http.StatusTooManyRequests, code, body)
	assert.Contains(t, body, "namespace team-b may store 0.001 bytes a second")
	assert.Equal(t, "1", header.Get("Retry-After"))
	e.stored(t, 1)

	// Refused before its body is read.
	body1 := &countingReader{r: strings.NewReader(data)}
	req := httptest.NewRequest(http.MethodPost, "/publish", body1)
	req.ContentLength = int64(len(data))
	for k, v := range binary("b3", "order.created.v1") {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer b")
	rec := httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Zero(t, body1.read, "the body of a request past its sender's bytes is not read")
	// One of unknown length: read, then refused.
	req = httptest.NewRequest(http.MethodPost, "/publish", strings.NewReader(data))
	req.ContentLength = -1
	for k, v := range binary("b4", "order.created.v1") {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer b")
	rec = httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "a body of unknown length")

	code, body, _ = send("a", "a1")
	assert.Equal(t, http.StatusNoContent, code, "another namespace: %s", body)
	code, body, _ = e.post(t, "/publish", binary("anon", "order.created.v1"), data)
	assert.Equal(t, http.StatusNoContent, code, "no namespace: %s", body)
	e.stored(t, 2)
}
