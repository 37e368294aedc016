package runtimes_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

// contractCase is one request to the contract test function and what Kyma's
// handler contract says must come back.
type contractCase struct {
	method string
	path   string
	header map[string]string
	body   string
	// only restricts the case to one language (Express-style or JavaScript-only features).
	only runtimes.Language

	status int
	// body, when set, is the exact response body.
	wantBody string
	// wantJSON, when set, are fields the JSON response must contain, compared
	// after a JSON round trip.
	wantJSON map[string]any
	// wantHeader are response headers that must have these values; an empty
	// value means the header must be absent.
	wantHeader map[string]string
	// check runs further assertions.
	check func(t *testing.T, rt runtimes.Runtime, r response)
}

func ceHeaders() map[string]string {
	return map[string]string{
		"Content-Type":        "application/json",
		"Ce-Specversion":      "1.0",
		"Ce-Type":             "order.created",
		"Ce-Source":           "shop",
		"Ce-Id":               "A234-1234-1234",
		"Ce-Eventtypeversion": "v1",
		"Ce-Time":             "2026-01-02T03:04:05Z",
	}
}

var wantCE = map[string]any{
	"ce-specversion":      "1.0",
	"ce-type":             "order.created",
	"ce-source":           "shop",
	"ce-id":               "A234-1234-1234",
	"ce-eventtypeversion": "v1",
	"ce-time":             "2026-01-02T03:04:05Z",
	"ce-datacontenttype":  "application/json",
}

func contractCases() map[string]contractCase {
	cases := map[string]contractCase{
		"sample function": {
			method: "GET", path: "/hello", status: 200, wantBody: "Hello World",
			wantHeader: map[string]string{"Access-Control-Allow-Origin": "*"},
		},
		"json data": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/json"},
			body: `{"a":1,"b":["x"]}`, status: 200,
			wantJSON: map[string]any{"kind": "json", "data": map[string]any{"a": 1, "b": []any{"x"}}, "ce": map[string]any{}},
		},
		"json with charset": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/json; charset=utf-8"},
			body: `[1,2]`, status: 200,
			wantJSON: map[string]any{"kind": "json", "data": []any{1, 2}},
		},
		"text data": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "text/plain"},
			body: "hi there", status: 200,
			wantJSON: map[string]any{"kind": "text", "data": "hi there"},
		},
		"raw data": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/octet-stream"},
			body: "raw bytes", status: 200,
			wantJSON: map[string]any{"kind": "bytes", "data": "raw bytes"},
		},
		"urlencoded data": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			body: "a=1&b=hello+world", status: 200,
			wantJSON: map[string]any{"kind": "json", "data": map[string]any{"a": "1", "b": "hello world"}},
		},
		// Kyma's Node.js runtimes read forms with body-parser's urlencoded
		// parser, extended (qs): nested brackets, indexed arrays, plain
		// objects (hasOwnProperty works), Object.prototype's names dropped.
		"urlencoded data as qs reads it": {
			method: "POST", path: "/own", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			body: "a[b][c]=1&x[0]=p&x[1]=q&__proto__[y]=1&hasOwnProperty=2", status: 200, only: runtimes.NodeJS,
			wantJSON: map[string]any{"own": true, "data": map[string]any{"a": map[string]any{"b": map[string]any{"c": "1"}}, "x": []any{"p", "q"}}},
		},
		// Express 5's default ("simple") query parser, Node's querystring:
		// brackets are part of the name, a repeated name is an array.
		"req.query as Express 5's simple parser": {
			method: "GET", path: "/query?a%5Bb%5D=1&r=1&r=2&s=x+y", only: runtimes.NodeJS, status: 200,
			wantJSON: map[string]any{"query": map[string]any{"a[b]": "1", "r": []any{"1", "2"}, "s": "x y"}, "noPrototype": true},
		},
		// Express 5 trusts no proxy by default: X-Forwarded-* are a
		// client's headers like any other.
		"req.protocol, secure, ips and hostname trust no proxy": {
			method: "GET", path: "/proxy", only: runtimes.NodeJS, status: 200,
			header:   map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "fn.example.com", "X-Forwarded-For": "1.2.3.4"},
			wantJSON: map[string]any{"protocol": "http", "secure": false, "ips": []any{}, "hostname": "127.0.0.1"},
		},
		// Kyma's setResponseHeader and sendResponse headers are Express's
		// res.set, which gives a text or JSON type its charset, and an
		// object returned goes to res.json, which gives any type utf-8.
		"a Content-Type set by the handler gets Express's charset": {
			method: "GET", path: "/ctype?t=text/plain", only: runtimes.NodeJS, status: 200, wantBody: "hi",
			wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		},
		"an object returned under a type the handler set is utf-8": {
			method: "GET", path: "/ctype?t=application/vnd.api%2Bjson&obj=1", only: runtimes.NodeJS, status: 200, wantBody: `{"a":1}`,
			wantHeader: map[string]string{"Content-Type": "application/vnd.api+json; charset=utf-8"},
		},
		"sendResponse's Content-Type gets Express's charset": {
			method: "GET", path: "/ctype?t=text/plain&send=1", only: runtimes.NodeJS, status: 200, wantBody: "hello",
			wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		},
		"a form of more than 1,000 parameters is 413": {
			method: "POST", path: "/own", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			body: strings.Repeat("p=1&", 1001), status: 413, only: runtimes.NodeJS, wantBody: "too many parameters",
		},
		"no body": {
			method: "GET", path: "/echo", status: 200,
			wantJSON: map[string]any{"kind": "none", "data": nil, "method": "GET", "path": "/echo"},
		},
		"empty JSON body": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/json"}, status: 200,
			check: func(t *testing.T, rt runtimes.Runtime, r response) {
				var got struct {
					Kind string `json:"kind"`
					Data any    `json:"data"`
				}
				require.NoError(t, json.Unmarshal([]byte(r.body), &got), r.body)
				if rt.Language == runtimes.NodeJS {
					assert.Equal(t, "json", got.Kind, "Node.js: {}, as body-parser gave")
					assert.Equal(t, map[string]any{}, got.Data)
				} else {
					assert.Equal(t, "none", got.Kind, "Python: None, as bottle's request.json gave")
				}
			},
		},
		"query and header": {
			method: "GET", path: "/echo?name=Ann%20B&x=1", header: map[string]string{"X-Test": "yes"}, status: 200,
			wantJSON: map[string]any{"query": map[string]any{"name": "Ann B"}, "header": "yes", "path": "/echo"},
		},
		"context": {
			method: "GET", path: "/echo", status: 200,
			check: func(t *testing.T, rt runtimes.Runtime, r response) {
				var got struct {
					Context map[string]any `json:"context"`
				}
				require.NoError(t, json.Unmarshal([]byte(r.body), &got), r.body)
				assert.Equal(t, "contract", got.Context["function-name"])
				assert.Equal(t, "tests", got.Context["namespace"])
				assert.Equal(t, rt.Name, got.Context["runtime"])
				assert.EqualValues(t, 3, got.Context["timeout"])
				if rt.Language == runtimes.NodeJS {
					assert.EqualValues(t, 1, got.Context["body-size-limit"], "MiB, as Kyma's Node.js runtime")
				} else {
					assert.EqualValues(t, 100<<20, got.Context["body-size-limit"], "bytes, as Kyma's Python runtime")
				}
			},
		},
		"binary cloudevent": {
			method: "POST", path: "/echo", header: ceHeaders(), body: `{"orderId":7}`, status: 200,
			wantJSON: map[string]any{"kind": "json", "data": map[string]any{"orderId": 7}, "ce": wantCE},
		},
		// As kfn's dispatcher writes a binary-mode event (the CloudEvents
		// HTTP binding's percent-encoding): the handler reads each
		// attribute as published, what Kyma's runtimes hand a handler of
		// a raw header. A value that is not percent-encoding stays.
		"percent-encoded attributes": {
			method: "POST", path: "/echo", body: `{"orderId":7}`, status: 200,
			header: func() map[string]string {
				h := ceHeaders()
				h["Ce-Myext"] = "%2541%20%22quoted%22%20caf%C3%A9%20%E2%82%AC"
				h["Ce-Raw"] = "100%"
				return h
			}(),
			wantJSON: map[string]any{"ce": func() map[string]any {
				ce := maps.Clone(wantCE)
				ce["ce-myext"] = `%41 "quoted" café €`
				ce["ce-raw"] = "100%"
				return ce
			}()},
		},
		"structured cloudevent": {
			method: "POST", path: "/echo",
			header: map[string]string{"Content-Type": "application/cloudevents+json; charset=utf-8"},
			body: `{"specversion":"1.0","type":"order.created","source":"shop","id":"A234-1234-1234",` +
				`"eventtypeversion":"v1","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data":{"orderId":7}}`,
			status:   200,
			wantJSON: map[string]any{"kind": "json", "data": map[string]any{"orderId": 7}, "ce": wantCE},
		},
		"structured cloudevent with base64 data": {
			method: "POST", path: "/echo",
			header: map[string]string{"Content-Type": "application/cloudevents+json"},
			body:   `{"specversion":"1.0","type":"t.x","source":"s","id":"1","data_base64":"aGVsbG8="}`,
			status: 200, wantJSON: map[string]any{"kind": "bytes", "data": "hello"},
		},
		"status, header and content type set through the event": {
			method: "GET", path: "/status", status: 201, wantBody: "created",
			wantHeader: map[string]string{"X-Custom": "yes", "Content-Type": "application/x-kfn"},
		},
		"object is sent as JSON": {
			method: "GET", path: "/object", status: 200, wantJSON: map[string]any{"ok": true},
			check: func(t *testing.T, _ runtimes.Runtime, r response) {
				assert.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "application/json"), r.header.Get("Content-Type"))
			},
		},
		"nothing returned is an empty 200": {method: "GET", path: "/none", status: 200, wantBody: ""},
		// Kyma's python312 hands the value to bottle, whose _cast answers
		// any falsy value with an empty 200 and joins a list of strings.
		"python312: 0 returned is an empty 200":     {method: "GET", path: "/returns?v=zero", only: runtimes.Python, status: 200, check: emptyBody},
		"python312: False returned is an empty 200": {method: "GET", path: "/returns?v=false", only: runtimes.Python, status: 200, check: emptyBody},
		"python312: [] returned is an empty 200":    {method: "GET", path: "/returns?v=emptylist", only: runtimes.Python, status: 200, check: emptyBody},
		"python312: a list of strings is joined": {method: "GET", path: "/returns?v=strlist", only: runtimes.Python, status: 200, wantBody: "ab",
			wantHeader: map[string]string{"Content-Type": "text/html; charset=UTF-8"}},
		"thrown error is a 500": {
			method: "GET", path: "/throw", status: 500, wantBody: "Internal server error",
			// Byte for byte Kyma's: Node.js's res.end adds no type,
			// python312's bottle its default.
			check: func(t *testing.T, rt runtimes.Runtime, r response) {
				want := map[runtimes.Language]string{runtimes.NodeJS: "", runtimes.Python: "text/html; charset=UTF-8"}[rt.Language]
				assert.Equal(t, want, r.header.Get("Content-Type"))
			},
		},
		"sendResponse with a status only is its text, as plain text": {
			method: "GET", path: "/callback-status", only: runtimes.NodeJS, status: 404, wantBody: "Not Found",
			wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		},
		"rejected promise is a 500": {
			method: "GET", path: "/reject", status: 500, wantBody: "Internal server error",
		},
		"thrown string is the body of the 500": {
			method: "GET", path: "/throw-string", only: runtimes.NodeJS, status: 500, wantBody: "custom failure",
		},
		"handler past FUNC_TIMEOUT is a 408": {
			method: "GET", path: "/hang", status: 408,
			// Kyma's older Node.js runtimes answer with Express's
			// sendStatus(408); python312's with bottle's HTTPError(408,
			// "Timeout while processing the function"), its text in
			// bottle's HTML page.
			check: func(t *testing.T, rt runtimes.Runtime, r response) {
				body, typ := "Request Timeout", "text/plain; charset=utf-8"
				if rt.Language == runtimes.Python {
					body, typ = "Timeout while processing the function", "text/html; charset=UTF-8"
				}
				assert.Equal(t, body, r.body)
				assert.Equal(t, typ, r.header.Get("Content-Type"))
			},
		},
		"header with a line break is a 500": {
			method: "GET", path: "/bad-header", status: 500, wantHeader: map[string]string{"Injected": ""},
		},
		"sys.exit in the handler is a 500": {method: "GET", path: "/exit", only: runtimes.Python, status: 500},
		"malformed JSON is a 400": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/json"},
			body: `{"a":`, status: 400,
		},
		"malformed structured cloudevent is a 400": {
			method: "POST", path: "/echo", header: map[string]string{"Content-Type": "application/cloudevents+json"},
			body: `[1]`, status: 400,
		},
		"healthz": {method: "GET", path: "/healthz", status: 200, wantBody: "OK"},
		"favicon": {method: "GET", path: "/favicon.ico", status: 204},
		"metrics": {
			method: "GET", path: "/metrics", status: 200,
			// The families are declared from the start; their series may not
			// be: Python's are labelled by method (as Kyma's), and the cases
			// run in parallel, so this one may come before any call. The
			// behaviour test checks the values after calls.
			check: func(t *testing.T, rt runtimes.Runtime, r response) {
				for _, family := range []string{"function_calls_total counter", "function_failures_total counter", "function_duration_seconds histogram"} {
					assert.Contains(t, r.body, "# TYPE "+family+"\n")
				}
				assert.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "text/plain"))
				if rt.Language == runtimes.Python {
					// What prometheus_client's default registry adds to
					// Kyma's Python runtimes' /metrics, as it writes it.
					for _, line := range []string{
						"# HELP python_gc_objects_uncollectable_total Uncollectable object found during GC\n# TYPE python_gc_objects_uncollectable_total counter\n",
						`python_gc_collections_total{generation="0"} `,
						"# TYPE python_info gauge\npython_info{implementation=\"CPython\",major=\"3\",",
						"# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ",
						"# TYPE process_cpu_seconds_total counter\n", "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.",
						"# TYPE process_open_fds gauge\n", "# TYPE process_max_fds gauge\n", "# TYPE process_virtual_memory_bytes gauge\n",
					} {
						assert.Contains(t, r.body, line)
					}
					assert.Regexp(t, `\nprocess_resident_memory_bytes [1-9]\.[0-9]+e\+0[0-9]\n`, r.body, "bytes, in Go's float format")
				}
			},
		},
		"CORS preflight": {
			method: "OPTIONS", path: "/anything",
			header: map[string]string{"Origin": "https://ui.example", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "X-Test"},
			status: 200,
			wantHeader: map[string]string{
				"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "PUT", "Access-Control-Allow-Headers": "X-Test",
			},
		},
		"HEAD":                               {method: "HEAD", path: "/method", status: 200, wantBody: ""},
		"event.tracer works without tracing": {method: "GET", path: "/tracer", status: 200, wantBody: "traced"},
		"Express response helpers": {
			method: "GET", path: "/express?name=x", header: map[string]string{"X-Test": "y"}, only: runtimes.NodeJS,
			status: 202, wantHeader: map[string]string{"X-Express": "yes", "Content-Type": "application/json; charset=utf-8"},
			wantJSON: map[string]any{"q": "x", "got": "y", "params": []any{"", "express"}, "is": nil, "hostname": "127.0.0.1"},
		},
		// Kyma's catch-all route (Express 5, app.all("*path")): the path
		// split at every '/', each segment a decoded URI component.
		"req.params.path as Express 5's catch-all": {
			method: "GET", path: "/params/b+c/%C3%A9%2Fx/", only: runtimes.NodeJS, status: 200,
			wantJSON: map[string]any{"params": []any{"", "params", "b+c", "é/x", ""}},
		},
		"req.body and req.is": {
			method: "POST", path: "/express", header: map[string]string{"Content-Type": "application/json"}, body: `{"k":"v"}`,
			only: runtimes.NodeJS, status: 202,
			wantJSON: map[string]any{"body": map[string]any{"k": "v"}, "is": "json"},
		},
		"res.redirect, cookie, append, vary": {
			method: "GET", path: "/redirect", only: runtimes.NodeJS, status: 301,
			wantHeader: map[string]string{"Location": "/elsewhere", "Vary": "Accept, Origin"},
			check: func(t *testing.T, _ runtimes.Runtime, r response) {
				assert.Equal(t, []string{"one", "two"}, r.header.Values("X-Multi"))
				cookie := r.header.Get("Set-Cookie")
				for _, part := range []string{"session=abc", "Max-Age=60", "Path=/", "HttpOnly", "Expires="} {
					assert.Contains(t, cookie, part)
				}
			},
		},
		"res.type": {
			method: "GET", path: "/typed", only: runtimes.NodeJS, status: 200,
			wantHeader: map[string]string{"Content-Type": "application/json; charset=utf-8"},
			wantJSON:   map[string]any{"typed": "application/json; charset=utf-8"},
		},
		"res.send after an await": {
			method: "GET", path: "/send", only: runtimes.NodeJS, status: 200, wantBody: "sent",
			wantHeader: map[string]string{"Content-Type": "text/html; charset=utf-8"},
		},
		"sendResponse callback": {
			method: "GET", path: "/callback", only: runtimes.NodeJS, status: 203, wantBody: "via callback",
			wantHeader: map[string]string{"X-Callback": "yes"},
		},
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		cases["method "+m] = contractCase{method: m, path: "/method", status: 200, wantBody: m}
	}
	// Kyma's Node.js runtimes answer every OPTIONS themselves (server.mjs);
	// Python's hosts give it to the handler (python312's Kyma answers 405,
	// runtimes/README.md's differences).
	cases["method OPTIONS, Node.js"] = contractCase{method: "OPTIONS", path: "/method", only: runtimes.NodeJS, status: 200,
		wantHeader: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "", "Access-Control-Allow-Headers": ""},
		check: func(t *testing.T, _ runtimes.Runtime, r response) {
			assert.Empty(t, r.body, "the handler was not called")
		}}
	cases["method OPTIONS, Python"] = contractCase{method: "OPTIONS", path: "/method", only: runtimes.Python, status: 200, wantBody: "OPTIONS"}
	return cases
}

// startContractHost starts the contract test function for rt.
func startContractHost(t *testing.T, rt runtimes.Runtime) *host {
	return startHost(t, rt, fixture(t, rt, "contract"), hostOptions{
		cfg: runtimes.Config{
			FunctionName: "contract",
			Namespace:    "tests",
			Timeout:      3 * time.Second,
		},
		env: map[string]string{"PERSON_NAME": "World"},
	})
}

// TestContract runs every contract case against each runtime's host, all
// requests against one host process per runtime, in parallel.
func TestContract(t *testing.T) {
	t.Parallel()
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			h := startContractHost(t, rt)
			for name, tc := range contractCases() {
				if tc.only != "" && tc.only != rt.Language {
					continue
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					r := h.mustDo(tc.method, tc.path, tc.header, tc.body)
					require.Equal(t, tc.status, r.status, "body: %s", r.body)
					if tc.wantBody != "" || tc.status == 204 || tc.method == "HEAD" || tc.path == "/none" {
						assert.Equal(t, tc.wantBody, r.body)
					}
					if tc.wantJSON != nil {
						var got map[string]any
						require.NoError(t, json.Unmarshal([]byte(r.body), &got), r.body)
						for k, want := range tc.wantJSON {
							assert.Equal(t, roundTrip(t, want), got[k], "field %q in %s", k, r.body)
						}
					}
					for k, v := range tc.wantHeader {
						assert.Equal(t, v, r.header.Get(k), "header %s", k)
					}
					if tc.check != nil {
						tc.check(t, rt, r)
					}
				})
			}
		})
	}
}

// emptyBody asserts the answer has no body.
func emptyBody(t *testing.T, _ runtimes.Runtime, r response) {
	t.Helper()
	assert.Empty(t, r.body)
}

// roundTrip returns v as encoding/json decodes it into an any.
func roundTrip(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}
