package publisher_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// keepStore is a JetStream that takes every message the real store
// writes, and keeps its events, decoded.
type keepStore struct {
	jetstream.JetStream
	mu     sync.Mutex
	events []event.Event
}

func (s *keepStore) PublishMsg(_ context.Context, m *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	e, err := eventstore.Decode(m.Header, m.Data)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.events = append(s.events, *e)
	s.mu.Unlock()
	return &jetstream.PubAck{Stream: "events"}, nil // the stream FuzzLegacyPublish stores into
}

// FuzzLegacyPublish sends Kyma's legacy event format (POST /{app}/v1/events)
// built from random fields, so that the fuzzer reaches the validation and
// type building behind the JSON parser (FuzzPublish's random bodies rarely
// are a legacy object). Every answer is 200 with the event id, or 400/413
// in Kyma's error format; every event stored is a valid CloudEvent whose
// type and source are not empty.
func FuzzLegacyPublish(f *testing.F) {
	f.Add("app", "order.created", "v1", "", "2026-01-01T00:00:00Z", `{"id":1}`)
	f.Add("app", "Account.Order.Created", "v2", "8954ad1c-78ed-4c58-a639-68bd44031de0", "2026-01-01T00:00:00+02:00", `"x"`)
	f.Add("my-app", "order-created.$#", "V1", "", "2026-01-01T00:00:00Z", `null`)
	f.Add("a.b", "...", "1", "not-a-uuid", "yesterday", `{`)
	f.Add("app", "", "", "", "", ``)
	f.Add("app", "ä.ö", "v\u00e91", "", "2026-13-01T00:00:00Z", `[]`)
	f.Fuzz(func(t *testing.T, app, typ, version, id, at, data string) {
		if app == "" || strings.ContainsAny(app, "/?#%") {
			return // not one path segment
		}
		store := &keepStore{}
		p, err := publisher.New(eventstore.New(store, "events"), publisher.Config{MaxRequestBytes: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		fields := map[string]any{"event-type": typ, "event-type-version": version, "event-id": id, "event-time": at}
		if json.Valid([]byte(data)) {
			fields["data"] = json.RawMessage(data)
		} else if data != "" {
			fields["data"] = data
		}
		body, err := json.Marshal(fields)
		if err != nil {
			return
		}
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
		req.URL.Path = "/" + app + "/v1/events"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var ok publisher.LegacyResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &ok); err != nil || ok.EventID == "" {
				t.Fatalf("200 without an event id: %s", rec.Body)
			}
			if len(store.events) == 0 {
				t.Fatalf("200 but nothing stored for %s", body)
			}
			for _, e := range store.events {
				if err := e.Validate(); err != nil || e.Type() == "" || e.Source() == "" || e.ID() != ok.EventID {
					t.Fatalf("stored an invalid event for %s: %v %s", body, err, e)
				}
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var bad publisher.LegacyError
			if err := json.Unmarshal(rec.Body.Bytes(), &bad); err != nil || bad.Status != rec.Code || bad.Message == "" {
				t.Fatalf("%d not in Kyma's error format: %s", rec.Code, rec.Body)
			}
			if len(store.events) != 0 {
				t.Fatalf("%d but %d events stored for %s", rec.Code, len(store.events), body)
			}
		case http.StatusNotFound, http.StatusMovedPermanently, http.StatusTemporaryRedirect:
			// the mux cleans or refuses some app names ("." or "..")
		default:
			t.Fatalf("answered %d to %s: %s", rec.Code, body, rec.Body)
		}
	})
}
