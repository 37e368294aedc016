package runtimes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/testport"
)

// bottleRequest is one request of the comparison: sent as it is to kfn's
// host and to bottle.
type bottleRequest struct {
	method, path string
	header       map[string]string
	body         string
}

// signedCookie is the cookie bottle 0.13's response.set_cookie('signed',
// 'v', secret='s3cret') sets (HMAC-SHA256 over the pickled name and value).
const signedCookie = "!vhU4d0XIKRWHmpULJyzYq8xd6Pbj6sDm8ItHEciVFS4=?gAWVEgAAAAAAAABdlCiMBnNpZ25lZJSMAXaUZS4="

const multipartBody = "preamble\r\n" +
	"--XyZ\r\n" +
	"Content-Disposition: form-data; name=\"field\"\r\n" +
	"\r\n" +
	"J\u00fcrgen value\r\n" +
	"--XyZ\r\n" +
	"Content-Disposition: form-data; name=\"latin\"\r\n" +
	"Content-Type: text/plain; charset=latin1\r\n" +
	"\r\n" +
	"caf\xe9\r\n" +
	"--XyZ\r\n" +
	"Content-Disposition: form-data; name=\"blank\"; filename=\"\"\r\n" +
	"\r\n" +
	"\r\n" +
	"--XyZ\r\n" +
	"Content-Disposition: form-data; name=\"upload\"; filename=\"C:\\dir\\M\u00ebine Datei.txt\"\r\n" +
	"Content-Type: text/plain\r\n" +
	"\r\n" +
	"line one\r\nline two\r\n" +
	"--XyZ\r\n" +
	"Content-Disposition: form-data; name=\"second\"; filename=\"../../etc/pass wd\"\r\n" +
	"Content-Type: application/octet-stream\r\n" +
	"\r\n" +
	"\x00\x01bin\r\n" +
	"--XyZ--\r\n" +
	"epilogue"

// bottleRequests are the requests of the comparison: every part of the
// request API a handler may read.
var bottleRequests = map[string]bottleRequest{
	"query, headers, cookies and authentication": {
		method: "GET",
		path:   "/orders/a%20b/%C3%BCber/x%2Fy?name=J%C3%BCrgen&a=1&a=2&n=7&type=order&empty=&flag&euro=%E2%82%AC&bad=%FF&+sp+=1+2",
		header: map[string]string{
			"X-Test": "yes", "X-Unicode": "J\u00fcrgen", "X-Requested-With": "XMLHttpRequest",
			"Cookie":          `c=1; d="two"; empty=; signed=` + signedCookie,
			"Authorization":   "Basic YWxpY2U6czNjcjN0OndpdGggY29sb24=",
			"X-Forwarded-For": "10.0.0.1, 10.0.0.2",
		},
	},
	"a proxy's forwarded host and scheme": {
		method: "DELETE", path: "/item/7?x=1",
		header: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "shop.example.com", "X-Test": "fwd"},
	},
	"JSON": {
		method: "POST", path: "/json",
		header: map[string]string{"Content-Type": "application/json", "X-Test": "j"},
		body:   `{"a": 1, "b": ["x", "\u00fc"]}`,
	},
	"JSON with a charset": {
		method: "POST", path: "/json",
		header: map[string]string{"Content-Type": "Application/JSON; charset=utf-8"},
		body:   `[1, 2]`,
	},
	"JSON-RPC that is no JSON": {
		method: "POST", path: "/rpc",
		header: map[string]string{"Content-Type": "application/json-rpc"},
		body:   `{"jsonrpc": `,
	},
	"empty JSON": {
		method: "PATCH", path: "/json",
		header: map[string]string{"Content-Type": "application/json"},
	},
	"urlencoded form": {
		method: "POST", path: "/form?text=from-query&a=0",
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		body:   "text=hello+world&name=J%C3%BCrgen&a=1&a=2&field",
	},
	"multipart form with files": {
		method: "POST", path: "/upload",
		header: map[string]string{"Content-Type": "multipart/form-data; boundary=XyZ"},
		body:   multipartBody,
	},
	"text is parsed as a form too": {
		method: "POST", path: "/text",
		header: map[string]string{"Content-Type": "text/plain"},
		body:   "hi there=1",
	},
	"no body": {method: "GET", path: "/"},
}

// bottle012 are the probes whose answer changed between Debian's bottle
// (0.12) and Kyma's (0.13.4): kfn answers as 0.13.4 does, given here (read
// from its source; a func makes it from 0.12's), instead of as the bottle
// it is compared with. Keyed by request name, then probe.
var bottle012 = map[string]map[string]any{
	"query, headers, cookies and authentication": {
		// 0.13 reads header values as UTF-8.
		"req.headers.get('X-Unicode')": "J\u00fcrgen",
		"dict(req.headers)": func(want any) any {
			m := want.(map[string]any)
			for _, kv := range m["map"].([]any) {
				if pair := kv.([]any); pair[0] == "X-Unicode" {
					pair[1] = "J\u00fcrgen"
				}
			}
			return m
		},
		// 0.13 signs cookies with HMAC-SHA256 over a pickle ('!sig?msg').
		"req.get_cookie('signed', secret='s3cret')": "v",
	},
	"JSON-RPC that is no JSON": {
		// 0.13 parses application/json-rpc and answers invalid JSON 400.
		"req.json": map[string]any{"raises": "HTTPError 400"},
	},
	"multipart form with files": nil, // 0.12 used cgi.FieldStorage: see multipart013
}

// bottle012Always are the probes of bottle012 for every request.
var bottle012Always = map[string]any{
	// 0.13 refuses to replace an attribute bottle has, and can delete
	// one's own.
	"(setattr(req, 'path', 'x'))":                  map[string]any{"raises": "AttributeError"},
	"(delattr(req, 'mine'), hasattr(req, 'mine'))": []any{nil, false},
}

// multipart013 are the answers of bottle 0.13.4's own multipart parser for
// "multipart form with files" (0.12 used cgi.FieldStorage, which differs).
var multipart013 = map[string]any{
	"list(req.forms.allitems())": []any{[]any{"field", "J\u00fcrgen value"}, []any{"latin", "caf\u00e9"}, []any{"blank", ""}},
	"list(req.POST.allitems())": []any{[]any{"field", "J\u00fcrgen value"}, []any{"latin", "caf\u00e9"}, []any{"blank", ""},
		[]any{"upload", map[string]any{"upload": []any{"upload", "M\u00ebine Datei.txt", "Meine-Datei.txt", "text/plain"}}},
		[]any{"second", map[string]any{"upload": []any{"second", "../../etc/pass wd", "pass-wd", "application/octet-stream"}}}},
	"list(req.params.allitems())":          []any{[]any{"field", "J\u00fcrgen value"}, []any{"latin", "caf\u00e9"}, []any{"blank", ""}},
	"req.forms.get('field')":               "J\u00fcrgen value",
	"req.forms.field":                      "J\u00fcrgen value",
	"req.forms.getunicode('field')":        "J\u00fcrgen value",
	"req.forms.get('latin')":               "caf\u00e9",
	"req.forms.get('blank')":               "",
	"sorted(req.files.keys())":             []any{"second", "upload"},
	"req.files.get('upload')":              map[string]any{"upload": []any{"upload", "M\u00ebine Datei.txt", "Meine-Datei.txt", "text/plain"}},
	"req.files.upload":                     map[string]any{"upload": []any{"upload", "M\u00ebine Datei.txt", "Meine-Datei.txt", "text/plain"}},
	"req.files.get('upload').filename":     "Meine-Datei.txt",
	"req.files.get('upload').raw_filename": "M\u00ebine Datei.txt",
	"req.files.get('upload').file.read()":  map[string]any{"bytes": "line one\r\nline two"},
	"req.files.get('second').filename":     "pass-wd",
}

// TestBottleRequestAsBottle sends the same requests to kfn's python312 host
// and to bottle itself on cheroot, as Kyma's python312 runtime serves them,
// with a handler that reads event['extensions']['request'] through every
// part of bottle's request API (testdata/python/bottle-probe), and
// compares the answers probe by probe.
func TestBottleRequestAsBottle(t *testing.T) {
	python := bottlePython(t)
	fn := fixture(t, lookup(t, "python312"), "bottle-probe")
	kfn := startHost(t, lookup(t, "python312"), fn, hostOptions{interpreter: python})
	ref := startBottle(t, python, filepath.Join(fn, "reference.py"))
	version := ref.get(t, "/_bottle_version")
	t.Logf("comparing with bottle %s", version)
	old := strings.HasPrefix(version, "0.12.")

	for name, r := range bottleRequests {
		t.Run(name, func(t *testing.T) {
			got := probe(t, kfn.URL, r)
			want := probe(t, ref.url, r)
			require.NotEmpty(t, want)
			exceptions := map[string]any{}
			if old {
				maps.Copy(exceptions, bottle012Always)
				maps.Copy(exceptions, bottle012[name])
				if name == "multipart form with files" {
					maps.Copy(exceptions, multipart013)
				}
			}
			for p, w := range want {
				if e, ok := exceptions[p]; ok {
					if f, ok := e.(func(any) any); ok {
						e = f(w)
					}
					assert.Equal(t, e, got[p], "%s (bottle 0.13.4's answer; %s answered %v)", p, version, w)
					continue
				}
				assert.Equal(t, w, got[p], "%s", p)
			}
		})
	}
}

// probe sends r to the server at base and returns the probe handler's
// answers.
func probe(t *testing.T, base string, r bottleRequest) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
	require.NoError(t, err)
	req.Host = "fn.example.com:8080"
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s at %s: %s", r.method, r.path, base, b)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return out
}

// bottleServer is reference.py running.
type bottleServer struct{ url string }

// startBottle runs reference.py (bottle on cheroot) with python on a free
// port until the test ends, and waits until it answers.
func startBottle(t *testing.T, python, script string) bottleServer {
	t.Helper()
	port := testport.Port(t)
	cmd := exec.Command(python, script, fmt.Sprint(port))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	s := bottleServer{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			t.Fatalf("reference.py exited: %s", out)
		default:
		}
		resp, err := probeClient.Get(s.url + runtimes.HealthPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 15*time.Second, 10*time.Millisecond, "reference.py did not answer: %s", out)
	return s
}

// get returns the body of a GET of path.
func (s bottleServer) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := client.Get(s.url + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestKymaPythonHandlersReadTheRequest runs a python312 handler that uses
// event['extensions']['request'] as Kyma's integration tests, examples,
// Busola template, performance scenario and function specification do
// (testdata/python/kyma-request), with bottle's HTTPResponse from the
// bottle package, as Kyma's image provides it.
func TestKymaPythonHandlersReadTheRequest(t *testing.T) {
	rt := lookup(t, "python312")
	h := startHost(t, rt, fixture(t, rt, "kyma-request"), hostOptions{
		interpreter: bottlePython(t),
		cfg:         runtimes.Config{FunctionName: "kyma-request", Namespace: "tests"},
	})

	t.Run("publisher mock: query.get(key=...), ceHeaders, vars() of headers and body", func(t *testing.T) {
		r := h.mustDo("GET", "/mock", nil, "")
		require.Equal(t, 200, r.status, r.body+h.out.String())
		assert.Equal(t, "{}", r.body)
		r = h.mustDo("POST", "/mock", map[string]string{
			"Content-Type": "application/json", "Ce-Specversion": "1.0", "Ce-Type": "order.created",
			"Ce-Source": "shop", "Ce-Id": "e-1",
		}, `{"id": 7}`)
		require.Equal(t, 201, r.status, r.body+h.out.String())
		r = h.mustDo("GET", "/mock?type=order.created&source=shop", nil, "")
		require.Equal(t, 200, r.status, r.body)
		var saved map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.body), &saved), r.body)
		assert.Equal(t, "order.created", saved["ce-type"])
		assert.Equal(t, "e-1", saved["ce-id"])
		assert.Equal(t, map[string]any{"id": float64(7)}, saved["data"])
		assert.NotContains(t, saved, "extensions")
		h.logged(t, "headers: {'environ': {")
		h.logged(t, "method: GET")
	})
	t.Run("params of the query and of a form", func(t *testing.T) {
		r := h.mustDo("GET", "/describe?text=two+words", nil, "")
		assert.Equal(t, 200, r.status, r.body)
		assert.JSONEq(t, `{"text": "two words", "words": 2}`, r.body)
		r = h.mustDo("POST", "/describe", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "text=a+b+c")
		assert.JSONEq(t, `{"text": "a b c", "words": 3}`, r.body)
		r = h.mustDo("GET", "/describe", nil, "")
		assert.Equal(t, 400, r.status)
		assert.Equal(t, `"text" is mandatory`, r.body)
	})
	t.Run("Busola's template", func(t *testing.T) {
		r := h.mustDo("GET", "/greet?greeting=Hi", nil, "")
		assert.Equal(t, "Hi from the Kyma Function kyma-request running on python312!", r.body)
	})
	t.Run("headers.get", func(t *testing.T) {
		r := h.mustDo("GET", "/area", map[string]string{"Width": " 3", "Height": "4"}, "")
		assert.JSONEq(t, `{"area": 12}`, r.body)
	})
	t.Run("HTTPResponse with headers, by the request's Content-Type", func(t *testing.T) {
		r := h.mustDo("POST", "/accept", map[string]string{"Content-Type": "application/json"}, "{}")
		assert.Equal(t, 202, r.status, r.body)
		assert.JSONEq(t, `{"success": "Message accepted."}`, r.body)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		r = h.mustDo("POST", "/accept", map[string]string{"Content-Type": "text/plain"}, "x")
		assert.Equal(t, 400, r.status, r.body)
		assert.JSONEq(t, `{"error": "Invalid Content-Type."}`, r.body)
	})
}
