package publisher_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/test/hostile"
)

// with is a binary-mode event's headers with the given ones changed.
func with(id string, changes map[string]string) map[string]string {
	h := binary(id, "order.created.v1")
	for k, v := range changes {
		h[k] = v
	}
	return h
}

// extensions returns n extension headers of the given value.
func extensions(n int, value string) map[string]string {
	h := map[string]string{}
	for i := range n {
		h[fmt.Sprintf("Ce-Ext%03d", i)] = value
	}
	return h
}

func structured(attrs map[string]any) (map[string]string, string) {
	e := map[string]any{"specversion": "1.0", "id": "s1", "source": "shop", "type": "order.created.v1", "data": map[string]int{"a": 1}}
	for k, v := range attrs {
		e[k] = v
	}
	b, _ := json.Marshal(e)
	return map[string]string{"Content-Type": "application/cloudevents+json"}, string(b)
}

// TestHostileEventsAreRefusedAndChangeNothing publishes, in every mode,
// what a hostile tenant would: attributes past every bound the event
// store sets (a type long enough to make NATS close the connection among
// them). Each gets a 4xx that says which bound, nothing of it is stored,
// and the next ordinary event is stored as before: the connection is
// still there. Events at every bound are stored.
func TestHostileEventsAreRefusedAndChangeNothing(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	batch := func(n int, last map[string]any) (map[string]string, string) {
		events := make([]map[string]any, n)
		for i := range events {
			events[i] = map[string]any{"specversion": "1.0", "id": fmt.Sprint("b", i), "source": "shop", "type": "order.created.v1"}
		}
		for k, v := range last {
			events[n-1][k] = v
		}
		b, _ := json.Marshal(events)
		return map[string]string{"Content-Type": "application/cloudevents-batch+json"}, string(b)
	}
	structuredLongType, structuredLongTypeBody := structured(map[string]any{"type": hostile.EventType(4200)})
	structuredBigExt, structuredBigExtBody := structured(map[string]any{"big": strings.Repeat("x", 100<<10)})
	batchTooMany, batchTooManyBody := batch(publisher.MaxBatchEvents+1, nil)
	batchLongLast, batchLongLastBody := batch(3, map[string]any{"type": hostile.EventType(v1alpha2.MaxEventTypeLength + 1)})
	batchLongID, batchLongIDBody := batch(3, map[string]any{"id": strings.Repeat("i", eventstore.MaxIDLength+1)})
	legacy := func(eventType string) string {
		return fmt.Sprintf(`{"event-type":%q,"event-type-version":"v1","event-time":"2026-01-01T00:00:00Z","data":{}}`, eventType)
	}
	tooMany := with("t", extensions(eventstore.MaxAttributes, "v"))
	tests := map[string]struct {
		path   string
		header map[string]string
		body   string
		want   int
		says   string
	}{
		"type that made NATS close the connection":   {"/publish", binary("1", hostile.EventType(4200)), `{}`, 400, "at most 1024"},
		"type one byte too long":                     {"/publish", binary("1", hostile.EventType(v1alpha2.MaxEventTypeLength+1)), `{}`, 400, "the type is 1025 bytes long"},
		"source one byte too long":                   {"/publish", with("1", map[string]string{"Ce-Source": strings.Repeat("s", v1alpha2.MaxEventSourceLength+1)}), `{}`, 400, "the source is 1025 bytes long"},
		"source that made NATS close the connection": {"/publish", with("1", map[string]string{"Ce-Source": strings.Repeat("s", 4200)}), `{}`, 400, "at most 1024"},
		"id one byte too long":                       {"/publish", binary(strings.Repeat("i", eventstore.MaxIDLength+1), "a.b"), `{}`, 400, "the id is 1025 bytes long"},
		"extension name too long":                    {"/publish", with("1", map[string]string{"Ce-" + strings.Repeat("n", eventstore.MaxExtensionNameLength+1): "v"}), `{}`, 400, "at most 64"},
		"too many attributes":                        {"/publish", tooMany, `{}`, 413, "at most 64 are allowed"},
		"attributes over their bytes":                {"/publish", with("1", map[string]string{"Ce-Big": strings.Repeat("x", 40<<10)}), `{}`, 413, "at most 32768"},
		"100 KiB extension, over the header limit":   {"/publish", with("1", map[string]string{"Ce-Big": strings.Repeat("x", 100<<10)}), `{}`, 431, ""},
		"structured type too long":                   {"/publish", structuredLongType, structuredLongTypeBody, 400, "at most 1024"},
		"structured 100 KiB extension":               {"/publish", structuredBigExt, structuredBigExtBody, 413, "at most 32768"},
		"v2 type too long":                           {"/shop/v2/events", binary("1", hostile.EventType(4200)), `{}`, 400, "at most 1024"},
		"batch over its events":                      {"/publish", batchTooMany, batchTooManyBody, 400, "at most 100"},
		"batch whose last event is too long":         {"/publish", batchLongLast, batchLongLastBody, 400, "event 2 of the batch"},
		"batch whose last id is too long":            {"/publish", batchLongID, batchLongIDBody, 400, "event 2 of the batch: invalid event: the id"},
		"legacy type too long":                       {"/shop/v1/events", map[string]string{"Content-Type": "application/json"}, legacy(hostile.EventType(4200)), 400, "at most 1024"},
		"legacy application too long":                {"/" + strings.Repeat("a", 4200) + "/v1/events", map[string]string{"Content-Type": "application/json"}, legacy("order.created"), 400, "at most 1024"},
	}
	ordinary := 0
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, body, hdr := e.post(t, tc.path, tc.header, tc.body)
			assert.Equal(t, tc.want, code, body)
			assert.Contains(t, body, tc.says)
			assert.Empty(t, hdr.Get("Retry-After"), "a refusal is for good: no Retry-After")
			ordinary++
			code, body, _ = e.post(t, "/publish", binary(fmt.Sprint("ok", ordinary), "order.created.v1"), `{}`)
			require.Equal(t, http.StatusNoContent, code, "the next ordinary event is stored: %s", body)
		})
	}
	got := e.stored(t, ordinary)
	for _, s := range got {
		assert.Equal(t, "kyma.shop.order.created.v1", s.Subject, "only the ordinary events were stored")
	}

	t.Run("events at every bound are stored", func(t *testing.T) {
		atBounds := map[string]map[string]string{
			"longest type":    binary("b1", hostile.EventType(v1alpha2.MaxEventTypeLength)),
			"longest source":  with("b2", map[string]string{"Ce-Source": strings.Repeat("s", v1alpha2.MaxEventSourceLength)}),
			"longest id":      binary(strings.Repeat("i", eventstore.MaxIDLength), "a.b"),
			"longest name":    with("b4", map[string]string{"Ce-" + strings.Repeat("n", eventstore.MaxExtensionNameLength): "v"}),
			"most attributes": with("b5", extensions(eventstore.MaxAttributes-5, "v")), // 4 attributes and Content-Type
			"most attribute bytes": with("b6", map[string]string{"Ce-Big": strings.Repeat("x",
				eventstore.MaxAttributeBytes-len("ce-big")-4-(len("ce-specversion1.0")+len("ce-idb6")+len("ce-sourceshop")+len("ce-typeorder.created.v1")+len("Content-Typeapplication/json")+4*5))}),
		}
		for name, h := range atBounds {
			code, body, _ := e.post(t, "/publish", h, `{}`)
			assert.Equal(t, http.StatusNoContent, code, "%s: %s", name, body)
		}
		e.stored(t, len(atBounds))
	})
}
