package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// Request is one publish of a hostile tenant, with the answer it must get.
type Request struct {
	// Name says what the request tries.
	Name string
	// Path is the publisher's path ("/publish", "/<app>/v1/events").
	Path string
	// Header and Body are the request's.
	Header map[string]string
	Body   string
	// Want is the status it must be answered with, Says a text the answer
	// contains ("" for none).
	Want int
	Says string
}

// EventType returns an event type of n bytes, in segments of up to 63.
func EventType(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len()%64 == 63 && b.Len() < n-1 {
			b.WriteByte('.')
			continue
		}
		b.WriteByte('a')
	}
	return b.String()
}

func binary(id, source, eventType string, extra map[string]string) map[string]string {
	h := map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": source, "Ce-Type": eventType, "Content-Type": "application/json"}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

func structured(attrs map[string]any) (map[string]string, string) {
	b, _ := json.Marshal(attrs)
	return map[string]string{"Content-Type": "application/cloudevents+json"}, string(b)
}

// Publishes returns the publish requests of a hostile tenant publishing as
// source; ids are unique per call with round. Each is refused with a 4xx
// that says why, and none changes anything for anyone.
func Publishes(source string, round int) []Request {
	id := func(name string) string { return fmt.Sprintf("%s-%d", name, round) }
	tooMany := map[string]string{}
	for i := range eventstore.MaxAttributes {
		tooMany[fmt.Sprintf("Ce-X%03d", i)] = "v"
	}
	longTypeH, longTypeB := structured(map[string]any{"specversion": "1.0", "id": id("structured"), "source": source, "type": EventType(4200)})
	bigExtH, bigExtB := structured(map[string]any{"specversion": "1.0", "id": id("ext"), "source": source, "type": "spam.sent.v1", "big": strings.Repeat("x", 100<<10)})
	batch := make([]map[string]any, publisher.MaxBatchEvents+1)
	for i := range batch {
		batch[i] = map[string]any{"specversion": "1.0", "id": fmt.Sprintf("%s-%d", id("batch"), i), "source": source, "type": "spam.sent.v1"}
	}
	batchB, _ := json.Marshal(batch)
	legacy := fmt.Sprintf(`{"event-type":%q,"event-type-version":"v1","event-time":"2026-01-01T00:00:00Z","data":{}}`, EventType(4200))
	return []Request{
		{Name: "a type that made NATS close the shared connection", Path: "/publish", Header: binary(id("type"), source, EventType(4200), nil), Body: "{}", Want: 400, Says: fmt.Sprint("at most ", v1alpha2.MaxEventTypeLength)},
		{Name: "a source that made NATS close the shared connection", Path: "/publish", Header: binary(id("source"), strings.Repeat("s", 4200), "spam.sent.v1", nil), Body: "{}", Want: 400, Says: fmt.Sprint("at most ", v1alpha2.MaxEventSourceLength)},
		{Name: "an id over its bound", Path: "/publish", Header: binary(strings.Repeat("i", eventstore.MaxIDLength+1), source, "spam.sent.v1", nil), Body: "{}", Want: 400, Says: "the id is"},
		{Name: "an extension name over its bound", Path: "/publish", Header: binary(id("name"), source, "spam.sent.v1", map[string]string{"Ce-" + strings.Repeat("n", eventstore.MaxExtensionNameLength+1): "v"}), Body: "{}", Want: 400, Says: "extension name"},
		{Name: "more attributes than a sink's HTTP server reads", Path: "/publish", Header: binary(id("many"), source, "spam.sent.v1", tooMany), Body: "{}", Want: 413, Says: "attributes"},
		{Name: "attributes over their bytes", Path: "/publish", Header: binary(id("bytes"), source, "spam.sent.v1", map[string]string{"Ce-Big": strings.Repeat("x", 40<<10)}), Body: "{}", Want: 413, Says: "bytes"},
		{Name: "a 100 KiB extension, once answered 503", Path: "/publish", Header: binary(id("100k"), source, "spam.sent.v1", map[string]string{"Ce-Big": strings.Repeat("x", 100<<10)}), Body: "{}", Want: 431},
		{Name: "a structured event with a type that closed the connection", Path: "/publish", Header: longTypeH, Body: longTypeB, Want: 400, Says: "at most"},
		{Name: "a structured event with a 100 KiB extension", Path: "/publish", Header: bigExtH, Body: bigExtB, Want: 413, Says: "bytes"},
		{Name: "a batch over its events", Path: "/publish", Header: map[string]string{"Content-Type": "application/cloudevents-batch+json"}, Body: string(batchB), Want: 400, Says: "at most"},
		{Name: "a legacy event with a type that closed the connection", Path: "/" + source + "/v1/events", Header: map[string]string{"Content-Type": "application/json"}, Body: legacy, Want: 400, Says: "at most"},
		{Name: "a body over the request limit", Path: "/publish", Header: binary(id("body"), source, "spam.sent.v1", nil), Body: strings.Repeat("x", 2<<20), Want: 413},
	}
}

// Send sends r to the publisher at base (http://host:port), with extra
// headers (a token) added, and returns the status and the start of the
// answer.
func (r Request) Send(ctx context.Context, client *http.Client, base string, extra map[string]string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+r.Path, strings.NewReader(r.Body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, string(b), nil
}

// Check returns an error unless the answer is the one r must get.
func (r Request) Check(code int, body string) error {
	if code != r.Want || !strings.Contains(body, r.Says) {
		return fmt.Errorf("%s: answered %d %.200q, want %d with %q", r.Name, code, body, r.Want, r.Says)
	}
	return nil
}

// Attack sends the publishes of the attacker (Publishes of AttackerSource)
// to the publisher at base, rounds times over or until ctx ends, and
// returns every answer that was not the one the publish must get.
func Attack(ctx context.Context, client *http.Client, base string, rounds int) []string {
	var wrong []string
	for round := 0; ctx.Err() == nil && round < rounds; round++ {
		for _, r := range Publishes(AttackerSource, round) {
			code, body, err := r.Send(ctx, client, base, nil)
			if err == nil {
				err = r.Check(code, body)
			}
			if err != nil {
				wrong = append(wrong, err.Error())
			}
		}
	}
	return wrong
}
