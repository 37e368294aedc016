package publisher_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/auth"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
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
		assert.Contains(t, body, "set by kfn's publisher only")
		code, body, _ = env.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents+json"},
			`{"specversion":"1.0","id":"f2","source":"shop","type":"order.paid.v1","`+publisher.SenderExtension+`":"team-b"}`)
		assert.Equal(t, http.StatusBadRequest, code, body)
		env.stored(t, 0)
	}
}
