package publisher_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// FuzzPublish sends random bodies and attributes to every publishing
// endpoint: no panic, and only the documented status codes.
func FuzzPublish(f *testing.F) {
	f.Add("/publish", "application/json", "1.0", "id", "src", "a.b", `{"x":1}`)
	f.Add("/publish", "application/cloudevents+json", "", "", "", "", `{"specversion":"1.0","id":"1","source":"s","type":"a.b","data":1}`)
	f.Add("/publish", "application/cloudevents-batch+json", "", "", "", "", `[{"specversion":"1.0","id":"1","source":"s","type":"a.b"}]`)
	f.Add("/app/v1/events", "application/json", "", "", "", "", `{"event-type":"a.b","event-type-version":"v1","event-time":"2026-01-01T00:00:00Z","data":{}}`)
	f.Add("/app/v2/events", "application/json", "1.0", "1", "s", "sap.kyma.custom.app.a.b.v1", "x")
	// The real store, over a JetStream that takes every event at once.
	p, err := publisher.New(eventstore.New(&answeringJetStream{}, stream.DefaultEventStream), publisher.Config{MaxRequestBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 204: true, 400: true, 404: true, 405: true, 413: true, 301: true, 307: true} // 301/307: the mux cleans paths such as "/."
	f.Fuzz(func(t *testing.T, path, contentType, specversion, id, source, typ, body string) {
		if !strings.HasPrefix(path, "/") {
			return
		}
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.URL.Path = path
		for k, v := range map[string]string{"Content-Type": contentType, "Ce-Specversion": specversion, "Ce-Id": id, "Ce-Source": source, "Ce-Type": typ} {
			if v != "" && !strings.ContainsAny(v, "\r\n\x00") {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("%s answered %d: %s", path, rec.Code, rec.Body.String())
		}
	})
}
