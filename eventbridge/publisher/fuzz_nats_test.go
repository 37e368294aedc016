package publisher_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// FuzzPublishToNATS publishes what it generates (attributes, an extension
// of any name and value, a body, in binary, structured and legacy mode)
// through the publisher to a real NATS server, then an ordinary event:
// whatever the first was answered, the ordinary one is stored. An input
// that made NATS close the shared connection (a subject over its control
// line, a header over JetStream's bound) would fail it, as every publish
// after it would fail in production.
func FuzzPublishToNATS(f *testing.F) {
	f.Add("/publish", "1.0", "id", "shop", strings.Repeat("a", 4200), "ext", "v", `{}`)
	f.Add("/publish", "1.0", "id", strings.Repeat("s", 4200), "a.b", "ext", "v", `{}`)
	f.Add("/publish", "1.0", strings.Repeat("i", 70000), "shop", "a.b", "ext", "v", `{}`)
	f.Add("/publish", "1.0", "id", "shop", "a.b", strings.Repeat("n", 300), "v", `{}`)
	f.Add("/publish", "1.0", "id", "shop", "a.b", "big", strings.Repeat("x", 60000), `{}`)
	f.Add("/shop/v1/events", "", "", "", "", "", "", `{"event-type":"`+strings.Repeat("a", 4200)+`","event-type-version":"v1","event-time":"2026-01-01T00:00:00Z","data":{}}`)
	f.Add("/publish", "", "", "", "", "", "", `{"specversion":"1.0","id":"1","source":"s","type":"`+strings.Repeat("t", 4200)+`"}`)
	ns := natstest.Start(f)
	js := ns.JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	if err := jsstream.Ensure(context.Background(), js, sc); err != nil {
		f.Fatal(err)
	}
	p, err := publisher.New(eventstore.New(js, sc.EventStream), publisher.Config{StoreTimeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config.MaxHeaderBytes = publisher.MaxHeaderBytes
	srv.Start()
	f.Cleanup(srv.Close)
	post := func(path string, header map[string]string, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, string(b)
	}
	f.Fuzz(func(t *testing.T, path, specversion, id, source, typ, extName, extValue, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#% \t\r\n") {
			return
		}
		header := map[string]string{"Content-Type": "application/json"}
		if strings.HasPrefix(body, `{"specversion"`) {
			header["Content-Type"] = "application/cloudevents+json"
		}
		for k, v := range map[string]string{"Ce-Specversion": specversion, "Ce-Id": id, "Ce-Source": source, "Ce-Type": typ, "Ce-" + extName: extValue} {
			if v != "" && k != "Ce-" && validHeader(k, v) {
				header[k] = v
			}
		}
		code, msg := post(path, header, body)
		if code >= 500 {
			t.Fatalf("%s answered %d: %s", path, code, msg)
		}
		code, msg = post("/publish", map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "ordinary", "Ce-Source": "shop", "Ce-Type": "order.created.v1", "Content-Type": "application/json"}, `{}`)
		if code != http.StatusNoContent {
			t.Fatalf("an ordinary event after %s was answered %d: %s", path, code, msg)
		}
	})
}

// validHeader reports whether Go's HTTP client sends the header at all.
func validHeader(k, v string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
