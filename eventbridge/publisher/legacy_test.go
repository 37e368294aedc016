package publisher_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

var jsonHeader = map[string]string{"Content-Type": "application/json"}

func TestLegacyPublish(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	code, body, h := e.post(t, "/commerce/v1/events", jsonHeader,
		`{"event-type":"sales.order.created","event-type-version":"v1","event-id":"8945ec08-256b-11eb-9928-acde48001122","event-time":"2026-01-02T03:04:05Z","data":{"id":7}}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.JSONEq(t, `{"event-id":"8945ec08-256b-11eb-9928-acde48001122","status":"","reason":""}`, body)

	got := e.stored(t, 2)
	assert.Equal(t, "kyma.commerce.sales.order.created.v1", got[0].Subject, "standard: source is the application")
	assert.Equal(t, "kyma.kyma.sap.kyma.custom.commerce.salesorder.created.v1", got[1].Subject, "exact: the full legacy type")
	for _, g := range got {
		assert.JSONEq(t, `{"id":7}`, g.Data)
		assert.Equal(t, []string{"8945ec08-256b-11eb-9928-acde48001122"}, g.Header["ce-id"])
		assert.Equal(t, []string{"v1"}, g.Header["ce-eventtypeversion"])
		assert.Equal(t, []string{"2026-01-02T03:04:05Z"}, g.Header["ce-time"])
		assert.Equal(t, []string{"application/json"}, g.Header["Content-Type"])
	}
}

func TestLegacyPublishGeneratesID(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	code, body, _ := e.post(t, "/app/v1/events", jsonHeader, `{"event-type":"a.b","event-type-version":"v2","event-time":"2026-01-02T03:04:05+01:00","data":"text"}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Regexp(t, `"event-id":"[0-9a-f-]{36}"`, body)
	e.stored(t, 2)
}

func TestLegacyErrors(t *testing.T) {
	e := newEnv(t, publisher.Config{MaxRequestBytes: 300}, nil)
	field := func(status int, msg, field, typ string) string {
		return `{"status":` + strconv.Itoa(status) + `,"type":"validation_violation","message":"` + msg + `","details":[{"field":"` + field + `","type":"` + typ + `","message":"` + msg + `"}]}`
	}
	valid := map[string]string{"event-type": `"order.created"`, "event-type-version": `"v1"`, "event-time": `"2026-01-02T03:04:05Z"`, "data": `{"a":1}`}
	without := func(drop string, set ...string) string {
		var parts []string
		for _, k := range []string{"event-type", "event-type-version", "event-time", "data", "event-id"} {
			v, ok := valid[k]
			for i := 0; i+1 < len(set); i += 2 {
				if set[i] == k {
					v, ok = set[i+1], true
				}
			}
			if k == drop || !ok {
				continue
			}
			parts = append(parts, `"`+k+`":`+v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	tests := map[string]struct {
		body     string
		wantCode int
		wantJSON string
		contains string
	}{
		"empty body":      {body: "", wantCode: 400, wantJSON: `{"status":400,"type":"bad_payload_syntax","message":"Bad payload syntax","moreInfo":"Bad payload syntax"}`},
		"not json":        {body: "{", wantCode: 400, contains: `"type":"bad_payload_syntax"`},
		"missing type":    {body: without("event-type"), wantCode: 400, wantJSON: field(400, "Missing field", "event-type", "missing_field")},
		"missing version": {body: without("event-type-version"), wantCode: 400, wantJSON: field(400, "Missing field", "event-type-version", "missing_field")},
		"bad version":     {body: without("", "event-type-version", `"-"`), wantCode: 400, wantJSON: field(400, "Invalid field", "event-type-version", "invalid_field")},
		"missing time":    {body: without("event-time"), wantCode: 400, wantJSON: field(400, "Missing field", "event-time", "missing_field")},
		"bad time":        {body: without("", "event-time", `"yesterday"`), wantCode: 400, wantJSON: field(400, "Invalid field", "event-time", "invalid_field")},
		"bad id":          {body: without("", "event-id", `"not-a-uuid"`), wantCode: 400, wantJSON: field(400, "Invalid field", "event-id", "invalid_field")},
		"missing data":    {body: without("data"), wantCode: 400, wantJSON: field(400, "Missing field", "data", "missing_field")},
		"empty data":      {body: without("", "data", `""`), wantCode: 400, wantJSON: field(400, "Missing field", "data", "missing_field")},
		"too large":       {body: without("", "data", `"`+strings.Repeat("x", 400)+`"`), wantCode: 413, contains: `"type":"request_body_too_large","message":"Request body too large"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, body, _ := e.post(t, "/app/v1/events", jsonHeader, tt.body)
			assert.Equal(t, tt.wantCode, code, body)
			if tt.wantJSON != "" {
				assert.JSONEq(t, tt.wantJSON, body)
			}
			assert.Contains(t, body, tt.contains)
		})
	}
	e.stored(t, 0)
}

func TestLegacyStoreFailure(t *testing.T) {
	e := newEnv(t, publisher.Config{StoreTimeout: 200 * time.Millisecond}, nil)
	e.nats.Shutdown()
	code, body, _ := e.post(t, "/app/v1/events", jsonHeader, `{"event-type":"a.b","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":1}`)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `"status":503`)
	assert.Contains(t, body, "unavailable")
}
