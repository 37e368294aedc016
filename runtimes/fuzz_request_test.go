package runtimes_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzHostRequest is a fuzzing client of both hosts one level above
// FuzzHostHTTP: well-formed HTTP requests with random methods, queries,
// content types, CloudEvent headers, an extra header and bodies, so that
// the hosts' CloudEvent and body parsing (binary and structured modes,
// JSON, text, bytes) sees the garbage rather than the HTTP parser. Every
// request is answered within the function timeout (no hang), with a status
// that is not a server error unless the handler itself failed, and the host
// still answers /healthz afterwards (no crash).
//
//	go test ./runtimes -run '^$' -fuzz FuzzHostRequest -fuzztime 100000x -parallel 1
func FuzzHostRequest(f *testing.F) {
	f.Add(uint8(1), "/echo", "application/json", "1.0", "order.created.v1", "shop", "1", "X-Test", "x", []byte(`{"id":1}`))
	f.Add(uint8(1), "/echo", "application/cloudevents+json", "", "", "", "", "", "", []byte(`{"specversion":"1.0","id":"1","source":"s","type":"t","data":{"a":[1,2]}}`))
	f.Add(uint8(1), "/echo", "application/cloudevents+json", "", "", "", "", "", "", []byte(`{"specversion":"1.0","data_base64":"!!!"}`))
	f.Add(uint8(1), "/echo", "application/cloudevents-batch+json", "", "", "", "", "", "", []byte(`[{}]`))
	f.Add(uint8(1), "/echo", "application/json; charset=utf-16", "1.0", "t", "s", "1", "Ce-Time", "not a time", []byte("\xff\xfe{"))
	f.Add(uint8(1), "/echo", "text/plain", "0.3", "", "", "", "Ce-Datacontenttype", "application/json", []byte("not json"))
	f.Add(uint8(0), "/echo?name=%zz&name=&=", "", "", "", "", "", "Content-Encoding", "gzip", []byte{})
	f.Add(uint8(2), "/status", "multipart/form-data; boundary=", "", "", "", "", "Ce-Traceparent", "00-zz", []byte("--\r\n"))
	f.Add(uint8(3), "/%2e%2e/%00", "application/x-www-form-urlencoded", "", "", "", "", "Expect", "100-continue", []byte("a=%zz"))
	f.Add(uint8(4), "/echo", "application/json", "1.0", strings.Repeat("t", 5000), "s", "1", "Ce-Extension-With-A-Very-Long-Name", strings.Repeat("v", 5000), []byte(strings.Repeat(`{"a":`, 5000)))

	// Found by this target: the Python host dropped the connection without
	// an answer on JSON nested too deep (RecursionError) and on a
	// data_base64 that is not base64 (binascii.Error); both are 400 now.
	f.Add(uint8(1), "/echo", "application/json", "1.0", "t", "s", "1", "", "", []byte(strings.Repeat("[", 100000)))
	f.Add(uint8(1), "/echo", "application/cloudevents+json", "", "", "", "", "", "", []byte(`{"data":`+strings.Repeat("[", 100000)))
	f.Add(uint8(1), "/echo", "application/cloudevents+json", "", "", "", "", "", "", []byte(`{"specversion":"1.0","data_base64":"abc"}`))

	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, http.MethodHead}
	var hosts []*host
	for _, rt := range testRuntimes(f) {
		hosts = append(hosts, startHost(f, rt, fixture(f, rt, "contract"), hostOptions{}))
	}
	client := &http.Client{Timeout: 10 * time.Second} // the hosts' function timeout is 5s
	f.Fuzz(func(t *testing.T, method uint8, path, contentType, specversion, typ, source, id, name, value string, body []byte) {
		// Always the fixture's /echo route (others sleep or hang on
		// purpose); the fuzzed part is the query.
		path = "/echo?" + strings.TrimLeft(path, "/")
		header := http.Header{}
		for k, v := range map[string]string{"Content-Type": contentType, "Ce-Specversion": specversion, "Ce-Type": typ, "Ce-Source": source, "Ce-Id": id, name: value} {
			if v != "" && validName(k) && validValue(v) {
				header.Set(k, v)
			}
		}
		if header.Get("Content-Length") != "" || header.Get("Transfer-Encoding") != "" || header.Get("Host") != "" || header.Get("Connection") != "" {
			return // framing is FuzzHostHTTP's
		}
		for _, h := range hosts {
			req, err := http.NewRequest(methods[int(method)%len(methods)], h.URL+path, bytes.NewReader(body))
			if err != nil {
				return // not a URL the client can send
			}
			req.Header = header.Clone()
			logged := len(h.out.String())
			resp, err := client.Do(req)
			if err != nil {
				if strings.Contains(err.Error(), "invalid") || strings.Contains(err.Error(), "malformed") {
					return // refused by the client before it was sent
				}
				t.Fatalf("%s host: %s %q: %v\n%s", h.rt.Language, req.Method, path, err, h.out.String())
			}
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			// A 5xx is the host's fault unless the handler failed (the
			// contract fixture is strict, e.g. about UTF-8) and the host
			// said so (the log line may follow the answer).
			handlerFailed := func() bool {
				for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if strings.Contains(h.out.String()[logged:], "kfn: function failed") {
						return true
					}
				}
				return false
			}
			if resp.StatusCode >= 500 && !handlerFailed() {
				t.Errorf("%s host answered %d to %s %q %v: %s\n%s", h.rt.Language, resp.StatusCode, req.Method, path, header, msg, h.out.String())
			}
			if !healthy(strings.TrimPrefix(h.URL, "http://")) {
				t.Fatalf("%s host stopped answering /healthz after %s %q %v\n%s", h.rt.Language, req.Method, path, header, h.out.String())
			}
		}
	})
}

// validName reports whether s is an HTTP header field name (a token).
func validName(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return s != ""
}

// validValue reports whether s can be an HTTP header field value.
func validValue(s string) bool {
	for _, c := range []byte(s) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
