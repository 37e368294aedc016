package runtimes_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

// requestRuntimes are the runtimes of Kyma's newer handler contract.
func requestRuntimes(t testing.TB) []runtimes.Runtime {
	return []runtimes.Runtime{lookup(t, "nodejs26"), lookup(t, "python314")}
}

// forEachRequestRuntime runs f in parallel for nodejs26 and python314.
func forEachRequestRuntime(t *testing.T, f func(t *testing.T, rt runtimes.Runtime)) {
	t.Helper()
	for _, rt := range requestRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			f(t, rt)
		})
	}
}

// requestCase is one call of the kyma fixture of a request-API runtime.
type requestCase struct {
	method, path, body string
	header             map[string]string
	status             int
	wantBody           string
	wantJSON           string
	wantHeader         map[string]string
}

// TestNodeJS26KymaHandlers runs nodejs26 handlers written as Kyma's
// documentation and upstream's tests write them: main(req, res) with
// Express's request and response, answering through res.
func TestNodeJS26KymaHandlers(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "nodejs26")
	h := startHost(t, rt, fixture(t, rt, "kyma"), hostOptions{
		cfg: runtimes.Config{FunctionName: "orders", Namespace: "shop", BodyLimit: 2 << 20},
	})
	tests := map[string]requestCase{
		"hello world": {method: "GET", path: "/hello", status: 200, wantBody: "Hello World!",
			wantHeader: map[string]string{"Access-Control-Allow-Origin": "*", "Content-Type": "text/html; charset=utf-8"}},
		"custom status":          {method: "GET", path: "/id", status: 400, wantBody: "Missing id parameter"},
		"query to json":          {method: "GET", path: "/id?id=42", status: 200, wantJSON: `{"id":"42"}`},
		"async handler":          {method: "GET", path: "/async", status: 200, wantJSON: `{"fetched":true}`},
		"json body":              {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/json"}, body: `{"name":"Kyma"}`, status: 200, wantJSON: `{"kind":"object","body":{"name":"Kyma"}}`},
		"json scalar body":       {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/json"}, body: `"just a string"`, status: 200, wantJSON: `{"kind":"string","body":"just a string"}`},
		"empty json body":        {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/json", "Content-Length": "0"}, status: 200, wantJSON: `{"kind":"object","body":{}}`},
		"structured body":        {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/cloudevents+json"}, body: `{"type":"a.b","data":1}`, status: 200, wantJSON: `{"kind":"object","body":{"type":"a.b","data":1}}`},
		"text body":              {method: "POST", path: "/body", header: map[string]string{"Content-Type": "text/plain"}, body: "hi", status: 200, wantJSON: `{"kind":"string","body":"hi"}`},
		"form body":              {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "a=1&b[c]=2", status: 200, wantJSON: `{"kind":"object","body":{"a":"1","b":{"c":"2"}}}`},
		"other type is raw":      {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/vnd.api+json"}, body: `{}`, status: 200, wantJSON: `{"kind":"buffer","body":"e30="}`},
		"no body":                {method: "GET", path: "/body", status: 200, wantJSON: `{"kind":"undefined"}`},
		"malformed json":         {method: "POST", path: "/body", header: map[string]string{"Content-Type": "application/json"}, body: `{`, status: 400},
		"metadata":               {method: "GET", path: "/meta", status: 200, wantJSON: `{"name":"orders","namespace":"shop","runtime":"nodejs26","timeout":5,"limit":2}`},
		"thrown string":          {method: "GET", path: "/throw-string", status: 500, wantBody: "bad thing"},
		"thrown error":           {method: "GET", path: "/throw", status: 500, wantBody: "Internal server error", wantHeader: map[string]string{"Content-Type": "text/html; charset=utf-8"}},
		"rejection":              {method: "GET", path: "/reject", status: 500, wantBody: "Internal server error"},
		"late rejection":         {method: "GET", path: "/late-reject", status: 200, wantBody: "answered"},
		"not a cloud event":      {method: "POST", path: "/not-an-event", header: map[string]string{"Content-Type": "application/json"}, body: `{}`, status: 200, wantJSON: `{"event":null}`},
		"binary without id":      {method: "POST", path: "/not-an-event", header: map[string]string{"Ce-Type": "a.b", "Ce-Source": "s", "Ce-Specversion": "1.0"}, body: `x`, status: 200, wantJSON: `{"event":null}`},
		"invalid emit throws":    {method: "GET", path: "/emit-invalid", status: 400, wantBody: "emitCloudEvent: type must be a non-empty string"},
		"tracer without tracing": {method: "GET", path: "/span", status: 200, wantJSON: `{"traced":"string"}`},
		"preflight answered by the host": {method: "OPTIONS", path: "/hello", header: map[string]string{"Origin": "https://app", "Access-Control-Request-Method": "PUT"}, status: 200,
			wantHeader: map[string]string{"Access-Control-Allow-Methods": "PUT", "Access-Control-Allow-Origin": "*"}},
		"any OPTIONS answered by the host": {method: "OPTIONS", path: "/hello", status: 200, wantBody: "",
			wantHeader: map[string]string{"Access-Control-Allow-Methods": "", "Access-Control-Allow-Origin": "*"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkRequestCase(t, h, tc)
		})
	}
	m := h.mustDo("GET", "/metrics", nil, "").body
	failures := metric(t, m, "function_failures_total")
	// thrown string, thrown error, rejection, the late rejection; the
	// malformed body never reached the handler.
	assert.Eventually(t, func() bool {
		r, err := h.do("GET", "/metrics", nil, nil)
		if err != nil {
			return false
		}
		n, err := metricSum(r.body, "function_failures_total")
		return err == nil && n == "4"
	}, 5*time.Second, 10*time.Millisecond, "failures: %s", failures)
	// The output reaches h.out through a pipe, after the answers.
	assert.Eventually(t, func() bool { return strings.Contains(h.out.String(), "failed after answering") }, 5*time.Second, 5*time.Millisecond,
		"a failure after the answer is logged: %s", h.out)
	assert.NotContains(t, h.out.String(), "User function not loaded")
}

// TestPython314KymaHandlers runs python314 handlers written as Kyma's
// documentation and upstream's tests write them: main() reading Flask's
// request and returning what a Flask view returns.
func TestPython314KymaHandlers(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "python314")
	h := startHost(t, rt, fixture(t, rt, "kyma"), hostOptions{
		cfg: runtimes.Config{FunctionName: "orders", Namespace: "shop"},
	})
	tests := map[string]requestCase{
		"query parameter":   {method: "GET", path: "/hello?name=Kyma", status: 200, wantBody: "Hello Kyma!", wantHeader: map[string]string{"Content-Type": "text/html; charset=utf-8"}},
		"default parameter": {method: "GET", path: "/hello", status: 200, wantBody: "Hello World!"},
		"flask response":    {method: "POST", path: "/check", header: map[string]string{"Content-Type": "text/plain"}, body: "x", status: 400, wantJSON: `{"error":"Content-Type must be application/json"}`, wantHeader: map[string]string{"Content-Type": "application/json"}},
		"status tuple":      {method: "POST", path: "/check", header: map[string]string{"Content-Type": "application/json"}, body: "{}", status: 202, wantBody: ""},
		"get_json":          {method: "POST", path: "/greet", header: map[string]string{"Content-Type": "application/json"}, body: `{"name":"Kyma"}`, status: 200, wantBody: "Hello, Kyma"},
		"bad request tuple": {method: "POST", path: "/greet", status: 400, wantBody: "Bad request"},
		"dict to json":      {method: "GET", path: "/meta", status: 200, wantJSON: `{"name":"orders","namespace":"shop","runtime":"python314","timeout":5,"limit":100}`},
		"list to json":      {method: "GET", path: "/items", status: 200, wantJSON: `[1,2,3]`},
		"streamed answer":   {method: "GET", path: "/stream", status: 200, wantBody: "ab"},
		"head":              {method: "HEAD", path: "/hello", status: 200, wantBody: "", wantHeader: map[string]string{"Content-Length": "12"}},
		"exception":         {method: "GET", path: "/fail", status: 500, wantBody: "Internal Server Error"},
		"abort":             {method: "GET", path: "/abort", status: 404},
		"options to the handler": {method: "OPTIONS", path: "/options", header: map[string]string{"Origin": "https://app", "Access-Control-Request-Method": "PUT"}, status: 200, wantBody: "method OPTIONS",
			wantHeader: map[string]string{"X-Handled-By": "handler", "Access-Control-Allow-Origin": ""}},
		"not a cloud event":      {method: "POST", path: "/not-an-event", header: map[string]string{"Content-Type": "application/json"}, body: `{}`, status: 200, wantJSON: `{"event":"None"}`},
		"unreadable cloud event": {method: "POST", path: "/not-an-event", header: map[string]string{"Content-Type": "application/cloudevents+json"}, body: `{"source":"s"}`, status: 500},
		"tracer without tracing": {method: "GET", path: "/span", status: 200, wantJSON: `{"traced":true}`},
		"body and flask's limit": {method: "POST", path: "/body", body: "12345", status: 200, wantJSON: `{"length":5,"limit":104857600}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkRequestCase(t, h, tc)
		})
	}
	m := h.mustDo("GET", "/metrics", nil, "").body
	assert.Contains(t, m, `function_failures_total{method="GET"} 2`, "the exception and the abort, as Kyma counts them")
	assert.Eventually(t, func() bool { return strings.Contains(h.out.String(), "RuntimeError: secret detail") }, 5*time.Second, 5*time.Millisecond,
		"the exception is logged: %s", h.out)
}

func checkRequestCase(t *testing.T, h *host, tc requestCase) {
	t.Helper()
	r := h.mustDo(tc.method, tc.path, tc.header, tc.body)
	require.Equal(t, tc.status, r.status, "%s %s: %s", tc.method, tc.path, r.body)
	switch {
	case tc.wantJSON != "":
		assert.JSONEq(t, tc.wantJSON, r.body)
	case tc.status < 300 || tc.wantBody != "":
		assert.Equal(t, tc.wantBody, r.body)
	}
	for k, v := range tc.wantHeader {
		assert.Equal(t, v, r.header.Get(k), "header %s", k)
	}
	assert.NotContains(t, r.body, "secret detail", "an exception's message is not sent")
}

// TestRequestAPICloudEvents runs upstream's CloudEvent test function on
// both runtimes: a POST without an event is emitted to the publisher as
// "send-check" (with the request's trace context), and the event as the
// bridge delivers it (binary) or a producer posts it (structured) is read
// back with getCloudEvent / get_cloud_event.
func TestRequestAPICloudEvents(t *testing.T) {
	t.Parallel()
	forEachRequestRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		pub := newPublisher(t)
		h := startHost(t, rt, fixture(t, rt, "kyma"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: pub.URL + "/publish"},
			env: map[string]string{"CE_SOURCE": "kfn-test-source"},
		})
		const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		r := h.mustDo("POST", "/ce", map[string]string{"Content-Type": "application/json", "Traceparent": traceparent}, `{"order":7}`)
		require.Equal(t, 200, r.status, r.body)
		var sent []emitted
		require.Eventually(t, func() bool { sent = pub.received(); return len(sent) == 1 }, 5*time.Second, 5*time.Millisecond)
		e := sent[0]
		assert.Equal(t, "send-check", e.header.Get("Ce-Type"))
		assert.Equal(t, "kfn-test-source", e.header.Get("Ce-Source"))
		assert.NotEmpty(t, e.header.Get("Ce-Id"))
		assert.Equal(t, "application/json", e.header.Get("Content-Type"))
		assert.Equal(t, traceparent, e.header.Get("Traceparent"), "the emitted event continues the call's trace")
		assert.JSONEq(t, `{"order":7}`, e.body)

		// Delivered back as the bridge delivers: binary mode.
		header := map[string]string{"Content-Type": "application/json"}
		for k, v := range e.header {
			if strings.HasPrefix(k, "Ce-") {
				header[k] = v[0]
			}
		}
		header["Ce-Customext"] = "yes%20%2541%20caf%C3%A9" // percent-encoded, as the dispatcher writes it
		r = h.mustDo("POST", "/ce", header, e.body)
		require.Equal(t, 200, r.status, r.body)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(h.mustDo("GET", "/ce", nil, "").body), &got))
		assert.Equal(t, "send-check", got["type"])
		assert.Equal(t, "kfn-test-source", got["source"])
		assert.Equal(t, "1.0", got["specversion"])
		assert.Equal(t, e.header.Get("Ce-Id"), got["id"])
		assert.Equal(t, "application/json", got["datacontenttype"])
		assert.Equal(t, map[string]any{"order": float64(7)}, got["data"])
		assert.Equal(t, "yes %41 café", got["custom"], "extensions, percent-decoded")
		sentTime, err := time.Parse(time.RFC3339Nano, e.header.Get("Ce-Time"))
		require.NoError(t, err)
		gotTime, err := time.Parse(time.RFC3339Nano, got["time"].(string))
		require.NoError(t, err, "time %v", got["time"])
		assert.True(t, sentTime.Equal(gotTime), "time %v, sent %v", gotTime, sentTime)

		// Posted by a producer: structured mode.
		r = h.mustDo("POST", "/ce", map[string]string{"Content-Type": "application/cloudevents+json"},
			`{"specversion":"1.0","type":"order.created","source":"/shop","id":"e-1","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data":{"a":1}}`)
		require.Equal(t, 200, r.status, r.body)
		require.NoError(t, json.Unmarshal([]byte(h.mustDo("GET", "/ce", nil, "").body), &got))
		assert.Equal(t, "order.created", got["type"])
		assert.Equal(t, "/shop", got["source"])
		assert.Equal(t, "e-1", got["id"])
		assert.Equal(t, map[string]any{"a": float64(1)}, got["data"])
	})
}

// TestRequestAPIEmit checks the sdk's emit on both runtimes: nodejs26's
// emitCloudEvent resolves with the publisher's answer and rejects when it
// refuses the event; python314's emit_cloud_event returns None, as
// Kyma's does, and raises when the publisher refuses the event (where
// Kyma's would lose it: runtimes/README.md, differences).
func TestRequestAPIEmit(t *testing.T) {
	t.Parallel()
	forEachRequestRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		pub := newPublisher(t)
		h := startHost(t, rt, fixture(t, rt, "kyma"), hostOptions{
			cfg: runtimes.Config{PublisherAddress: pub.URL + "/publish"},
			env: map[string]string{"PUBLISHER_TOKEN": "s3cret"},
		})
		r := h.mustDo("GET", "/emit", map[string]string{"Ce-Kfnhops": "2"}, "")
		require.Equal(t, 200, r.status, r.body)
		if rt.Language == runtimes.NodeJS {
			assert.JSONEq(t, `{"status":204}`, r.body)
		} else {
			assert.JSONEq(t, `{"returned":"None"}`, r.body)
		}
		got := pub.received()
		require.Len(t, got, 1)
		assert.Equal(t, "order.created.v1", got[0].header.Get("Ce-Type"))
		assert.Equal(t, "v1", got[0].header.Get("Ce-Eventtypeversion"))
		assert.Equal(t, "Bearer s3cret", got[0].header.Get("Authorization"))
		assert.Equal(t, "3", got[0].header.Get("Ce-Kfnhops"), "one hop further than the call's event")
		assert.JSONEq(t, `{"x":1}`, got[0].body)

		r = h.mustDo("GET", "/emit?type=fail.me.v1", nil, "")
		if rt.Language == runtimes.NodeJS {
			assert.Equal(t, 502, r.status)
			assert.Contains(t, r.body, "507")
		} else {
			assert.Equal(t, 500, r.status)
			assert.Eventually(t, func() bool { return strings.Contains(h.out.String(), "publisher answered 507") }, 5*time.Second, 5*time.Millisecond,
				"the refused event is logged: %s", h.out)
		}
	})
}

// TestRequestAPILimits checks Kyma's FUNC_BODY_MB_LIMIT (MB, set in the
// Function's env) and FUNC_TIMEOUT with each runtime's answers.
func TestRequestAPILimits(t *testing.T) {
	t.Parallel()
	forEachRequestRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "kyma"), hostOptions{
			cfg: runtimes.Config{Timeout: time.Second},
			env: map[string]string{"FUNC_BODY_MB_LIMIT": "1"},
		})
		r := h.mustDo("GET", "/meta", nil, "")
		require.Equal(t, 200, r.status, r.body)
		var meta map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.body), &meta))
		assert.Equal(t, float64(1), meta["limit"], "getBodySizeLimit: the user's FUNC_BODY_MB_LIMIT, in MB")
		assert.Equal(t, float64(1), meta["timeout"])
		assert.Equal(t, fixture(t, rt, "kyma"), h.mustDo("GET", "/path", nil, "").body,
			"HANDLER_PATH (nodejs26), FUNCTION_PATH (python314): the function's directory")

		big := strings.Repeat("x", 1<<20+1)
		r = h.mustDo("POST", "/body", map[string]string{"Content-Type": "text/plain"}, big)
		assert.Equal(t, 413, r.status)
		r = h.mustDo("POST", "/body", map[string]string{"Content-Type": "text/plain"}, big[:1<<20])
		assert.Equal(t, 200, r.status)

		// Kyma's answers, byte for byte: nodejs26's Express text, python314's
		// Flask view returning a str.
		path, want, typ := "/never", "Request Timeout", "text/plain; charset=utf-8"
		if rt.Language == runtimes.Python {
			path, want, typ = "/sleep?s=3", "Timeout while processing the function", "text/html; charset=utf-8"
		}
		r = h.mustDo("GET", path, nil, "")
		assert.Equal(t, 408, r.status)
		assert.Equal(t, want, r.body)
		assert.Equal(t, typ, r.header.Get("Content-Type"))
	})
}

// TestNodeJS26ESModule runs the ES module handler of Kyma's migration
// guide, which imports the sdk by name.
func TestNodeJS26ESModule(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "nodejs26")
	h := startHost(t, rt, fixture(t, rt, "esm"), hostOptions{cfg: runtimes.Config{FunctionName: "esm"}})
	assert.Equal(t, "not a cloud event from esm", h.mustDo("GET", "/", nil, "").body)
	r := h.mustDo("POST", "/", map[string]string{
		"Content-Type": "text/plain", "Ce-Type": "order.paid", "Ce-Source": "shop", "Ce-Id": "1", "Ce-Specversion": "1.0",
	}, "x")
	assert.Equal(t, "order.paid", r.body)
}

// TestPython314WithoutFlask checks what a python3 without Flask does (kfn
// dev on a machine without it): the host serves without the handler and
// its readiness says what to install.
func TestPython314WithoutFlask(t *testing.T) {
	t.Parallel()
	rt := lookup(t, "python314")
	// -S: no site-packages, so no Flask, whatever the machine has.
	h := startHost(t, rt, fixture(t, rt, "sample"), hostOptions{interpreterArgs: []string{"-S"}, noWait: true})
	h.waitServing(15 * time.Second)
	r := h.mustDo("GET", runtimes.ReadyPath, nil, "")
	assert.Equal(t, 500, r.status)
	assert.Contains(t, r.body, "python314 runs handlers in Flask")
	assert.Contains(t, r.body, "apt-get install python3-flask")
	assert.Equal(t, "User function not loaded", h.mustDo("GET", "/", nil, "").body)
}

// TestRequestAPIHandlerNames checks the names Kyma's newer runtimes give
// the host's variables, as the handler sees them: HANDLER_MOD_NAME and
// HANDLER_FUNC_NAME choose the module and function (MOD_NAME and
// FUNC_HANDLER are not set), HANDLER_PATH is the function's directory and
// the body limit is FUNC_BODY_MB_LIMIT.
func TestRequestAPIHandlerNames(t *testing.T) {
	t.Parallel()
	forEachRequestRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		dir := fixture(t, rt, "custom-names")
		h := startHost(t, rt, dir, hostOptions{cfg: runtimes.Config{Module: "app", Handler: "handle"}})
		r := h.mustDo("GET", "/", nil, "")
		require.Equal(t, 200, r.status, r.body+h.out.String())
		limit := "1"
		if rt.Language == runtimes.Python {
			limit = "100"
		}
		assert.JSONEq(t, `{"HANDLER_MOD_NAME": "app", "HANDLER_FUNC_NAME": "handle", "HANDLER_PATH": "`+dir+`",
			"FUNC_BODY_MB_LIMIT": "`+limit+`", "FUNC_PORT": "8080",
			"MOD_NAME": null, "FUNC_HANDLER": null, "REQ_MB_LIMIT": null, "FUNC_MEMFILE_MAX": null}`, r.body)
	})
}
