package runtimes_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

// TestRawHTTP sends hand-written requests, well-formed and not, and checks
// the answers and that the host keeps serving. The Python host parses HTTP
// itself, so this is its parser's test; Node.js runs the same table.
func TestRawHTTP(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		raw string
		// statuses are the answers expected, in order, on this connection.
		statuses []int
		// oneOf, when set, replaces statuses[0] by a set of acceptable codes
		// (the hosts' parsers may name the same error differently).
		oneOf []int
		// closed says the host must close the connection after the answers.
		closed bool
		// body is a string the last answer's body must contain.
		body string
	}{
		"pipelined requests are answered in order": {
			raw:      "GET /method HTTP/1.1\r\nHost: x\r\n\r\nPUT /method HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
			statuses: []int{200, 200}, body: "PUT",
		},
		"HTTP/1.0 closes after the answer": {
			raw: "GET /hello HTTP/1.0\r\n\r\n", statuses: []int{200}, closed: true, body: "Hello",
		},
		"Connection: close is honoured": {
			raw: "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", statuses: []int{200}, closed: true,
		},
		"absolute-form target": {
			raw: "GET http://example.com/method?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n", statuses: []int{200}, body: "GET",
		},
		"chunked body": {
			raw: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
			statuses: []int{200}, body: "hello world",
		},
		"Expect: 100-continue": {
			raw:      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi",
			statuses: []int{100, 200}, body: `"hi"`,
		},
		"malformed request line": {
			raw: "NONSENSE\r\n\r\n", statuses: []int{400}, closed: true,
		},
		"header line without a colon": {
			raw: "GET /hello HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", statuses: []int{400}, closed: true,
		},
		"malformed Content-Length": {
			raw: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", statuses: []int{400}, closed: true,
		},
		"negative Content-Length": {
			raw: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", statuses: []int{400}, closed: true,
		},
		"malformed chunk size": {
			raw:      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
			statuses: []int{400}, closed: true,
		},
		"header over 64 KiB": {
			raw:      "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n",
			statuses: []int{431}, oneOf: []int{400, 431}, closed: true,
		},
		"unsupported transfer encoding": {
			raw:      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
			statuses: []int{501}, oneOf: []int{400, 501}, closed: true,
		},
	}
	forEachRuntime(t, func(t *testing.T, rt runtimes.Runtime) {
		h := startHost(t, rt, fixture(t, rt, "contract"), hostOptions{env: map[string]string{"PERSON_NAME": "raw"}})
		addr := strings.TrimPrefix(h.URL, "http://")
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
				_, err = io.WriteString(c, tc.raw)
				require.NoError(t, err)
				r := bufio.NewReader(c)
				var body string
				for i, want := range tc.statuses {
					resp, err := http.ReadResponse(r, nil)
					require.NoError(t, err, "answer %d\n%s", i+1, h.out)
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					body = string(b)
					if i == 0 && tc.oneOf != nil {
						assert.Contains(t, tc.oneOf, resp.StatusCode, "answer %d: %s", i+1, body)
					} else {
						assert.Equal(t, want, resp.StatusCode, "answer %d: %s", i+1, body)
					}
				}
				if tc.body != "" {
					assert.Contains(t, body, tc.body)
				}
				if tc.closed {
					_, err := r.ReadByte()
					assert.ErrorIs(t, err, io.EOF, "the connection is closed")
				}
			})
		}
		t.Cleanup(func() {
			// After all of it, the host still serves.
			assert.Equal(t, "Hello raw", h.mustDo("GET", "/hello", nil, "").body)
		})
	})
}
