package dev

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGuardAdmin(t *testing.T) {
	h := guardAdmin(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	tests := map[string]struct {
		method, host string
		header       map[string]string
		want         int
	}{
		"the kfn command":                   {method: "POST", host: "127.0.0.1:8080", want: 204},
		"IPv6 address":                      {method: "POST", host: "[::1]:8080", want: 204},
		"localhost":                         {method: "GET", host: "localhost:8080", want: 204},
		"the web view replays":              {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8080"}, want: 204},
		"another site posts":                {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		"another origin posts, old browser": {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Origin": "https://evil.example"}, want: 403},
		"another site reads":                {method: "GET", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 204},
		"DNS rebinding reads":               {method: "GET", host: "evil.example:8080", want: 403},
		"DNS rebinding posts same-origin":   {method: "POST", host: "evil.example:8080", header: map[string]string{"Sec-Fetch-Site": "same-origin"}, want: 403},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://x/_kfn/deadletters/1/replay", nil)
			r.Host = tc.host
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tc.want, w.Code, w.Body.String())
		})
	}
}

// TestGuardEvents: publishing and calling functions are refused to pages
// of other sites and to names other than localhost (DNS rebinding; the
// hosts of the project's APIRules are served before), and
// taken from tools, kfn dev's own pages and the developer's front end on
// this machine.
func TestGuardEvents(t *testing.T) {
	h := guardEvents(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for name, tc := range map[string]struct {
		method, host string
		header       map[string]string
		want         int
	}{
		"curl publishes":                          {method: "POST", host: "127.0.0.1:8080", want: 204},
		"a function publishes":                    {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Content-Type": "application/cloudevents+json"}, want: 204},
		"the developer's front end on a port":     {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost:3000"}, want: 204},
		"a page of kfn dev":                       {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8080"}, want: 204},
		"another site publishes":                  {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, want: 403},
		"another site, no Origin":                 {method: "PUT", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403},
		"a sandboxed page":                        {method: "POST", host: "127.0.0.1:8080", header: map[string]string{"Origin": "null"}, want: 403},
		"a page on the LAN":                       {method: "DELETE", host: "127.0.0.1:8080", header: map[string]string{"Origin": "http://192.168.1.20"}, want: 403},
		"another site calls a function with GET":  {method: "GET", host: "127.0.0.1:8080", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, want: 204},
		"DNS rebinding calls a function":          {method: "GET", host: "evil.example:8080", want: 403},
		"DNS rebinding publishes from its origin": {method: "POST", host: "evil.example:8080", header: map[string]string{"Origin": "http://evil.example:8080"}, want: 403},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://x/publish", nil)
			r.Host = tc.host
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tc.want, w.Code, w.Body.String())
		})
	}
}
