package runtimes_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzHostHTTP sends arbitrary bytes to both hosts and checks that each
// still answers /healthz afterwards: no input stops a host or wedges it.
// The seed corpus runs with go test; to explore further (the Python host's
// HTTP parser is ours), run one worker, as every worker starts its own hosts:
//
//	go test ./runtimes -run '^$' -fuzz FuzzHostHTTP -fuzztime 100000x -parallel 1
func FuzzHostHTTP(f *testing.F) {
	seeds := []string{
		"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
		"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /echo HTTP/1.1\r\nContent-Type: application/cloudevents+json\r\nContent-Length: 2\r\n\r\n{}",
		"POST /echo HTTP/1.1\r\nCe-Type: t\r\nCe-Source: s\r\nContent-Length: 3\r\n\r\nabc",
		"GET / HTTP/1.0\r\n\r\n",
		"OPTIONS /x HTTP/1.1\r\nAccess-Control-Request-Method: PUT\r\n\r\n",
		"GET /metrics HTTP/1.1\r\n\r\nGET /favicon.ico HTTP/1.1\r\n\r\n",
		"\r\n\r\nGET /hello HTTP/1.1\r\n\r\n",
		"GET /hello HTTP/9.9\r\n\r\n",
		"POST /echo HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
		"GET /hello HTTP/1.1\r\nX: " + strings.Repeat("y", 1000) + "\r\n\r\n",
		"\x00\x01\x02\xff\xfe",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	var addrs []string
	for _, rt := range testRuntimes(f) {
		h := startHost(f, rt, fixture(f, rt, "contract"), hostOptions{})
		addrs = append(addrs, strings.TrimPrefix(h.URL, "http://"))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, addr := range addrs {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial %s: %v", addr, err)
			}
			_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
			_, _ = c.Write(raw)
			// Half-close: a host that answered closes at once instead of
			// keeping the connection alive until the read deadline.
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, c)
			c.Close()
			if !healthy(addr) {
				t.Fatalf("host at %s stopped answering /healthz after %q", addr, raw)
			}
		}
	})
}

func healthy(addr string) bool {
	resp, err := probeClient.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == 200
}
