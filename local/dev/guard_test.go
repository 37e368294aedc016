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
