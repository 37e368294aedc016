package extauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/extauth"
)

// The chart's authorizers: a JSON list with unique names and http(s)
// URLs; anything else is refused with what to fix.
func TestParseAuthorizers(t *testing.T) {
	as, err := extauth.ParseAuthorizers(`[{"name":"oauth2-proxy","url":"http://oauth2-proxy.auth.svc:4180/oauth2/auth","timeout":"2s","includeRequestHeaders":["cookie"]}]`)
	require.NoError(t, err)
	require.Len(t, as, 1)
	assert.Equal(t, extauth.Duration(2*time.Second), as[0].Timeout)
	none, err := extauth.ParseAuthorizers("")
	require.NoError(t, err)
	assert.Empty(t, none)
	for name, s := range map[string]string{
		"twice":         `[{"name":"a","url":"http://a"},{"name":"a","url":"http://b"}]`,
		"no name":       `[{"url":"http://a"}]`,
		"not http":      `[{"name":"a","url":"file:///etc/passwd"}]`,
		"unknown field": `[{"name":"a","url":"http://a","failOpen":true}]`,
		"bad timeout":   `[{"name":"a","url":"http://a","timeout":"soon"}]`,
		"not a list":    `{"name":"a"}`,
	} {
		_, err := extauth.ParseAuthorizers(s)
		assert.Error(t, err, name)
	}
}

// One namespace's checks at its bound wait (and are refused 429 when
// their timeout ends) without stopping another namespace's; an authorizer
// that does not answer in time refuses.
func TestChecksInFlightAreBoundedPerNamespace(t *testing.T) {
	release := make(chan struct{})
	authz := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		switch r.Host {
		case "slow.example.com":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "hang.example.com":
			<-r.Context().Done()
		}
	}))
	t.Cleanup(authz.Close)
	c := extauth.New([]extauth.Authorizer{
		{Name: "patient", URL: authz.URL, Timeout: extauth.Duration(time.Minute)},
		{Name: "quick", URL: authz.URL, Timeout: extauth.Duration(200 * time.Millisecond)},
	}, extauth.Config{InFlightPerNamespace: 1})
	req := func(host string) *http.Request { return httptest.NewRequest(http.MethodGet, "http://"+host+"/", nil) }

	held := make(chan *extauth.Denial, 1)
	go func() { held <- c.Check(context.Background(), "mallory", []string{"patient"}, req("slow.example.com")) }()
	require.Eventually(t, func() bool {
		d := c.Check(context.Background(), "mallory", []string{"quick"}, req("fast.example.com"))
		return d != nil && d.Status == http.StatusTooManyRequests
	}, 5*time.Second, 10*time.Millisecond, "mallory's second check waits for its seat, and is refused")
	assert.Nil(t, c.Check(context.Background(), "bank", []string{"quick"}, req("fast.example.com")), "another namespace's check goes on")
	close(release)
	assert.Nil(t, <-held)

	d := c.Check(context.Background(), "bank", []string{"quick"}, req("hang.example.com"))
	require.NotNil(t, d)
	assert.Equal(t, http.StatusForbidden, d.Status, "an authorizer that does not answer in time refuses")
	assert.Contains(t, string(d.Body), "did not answer within 200ms")
	assert.Empty(t, c.Unknown([]string{"quick", "patient"}))
	assert.Equal(t, "b", c.Unknown([]string{"quick", "b"}))
}

// An authorizer is asked with the request's method, path and query after
// its own path, Host and the headers it names; 200 allows and adds
// headersToUpstream; another answer is refused with its status, the
// headers it may pass on and its body (a 2xx other than 200 neither
// allows nor says why: 403); an authorizer not defined refuses.
func TestCheckAsksAndPassesOnTheAnswer(t *testing.T) {
	authz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Method+" "+r.Host+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization")+"|"+r.Header.Get("X-Other"))
		switch r.Header.Get("Authorization") {
		case "ok":
			w.Header().Set("X-User", "alice")
		case "empty":
			w.WriteHeader(http.StatusNoContent)
		case "300", "399", "400":
			code, _ := strconv.Atoi(r.Header.Get("Authorization"))
			w.WriteHeader(code)
		default:
			w.Header().Set("Www-Authenticate", "Basic")
			w.Header().Set("X-Internal", "secret")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("who are you"))
		}
	}))
	t.Cleanup(authz.Close)
	c := extauth.New([]extauth.Authorizer{{Name: "a", URL: authz.URL + "/check/", HeadersToUpstream: []string{"x-user", "x-seen"}}}, extauth.Config{})
	ask := func(auth string) (*http.Request, *extauth.Denial) {
		req := httptest.NewRequest(http.MethodPut, "http://orders.example.com/orders/1?x=2", nil)
		req.Header.Set("Authorization", auth)
		req.Header.Set("X-Other", "not sent")
		return req, c.Check(context.Background(), "shop", []string{"a"}, req)
	}
	req, d := ask("ok")
	require.Nil(t, d)
	assert.Equal(t, "alice", req.Header.Get("X-User"))
	assert.Equal(t, "PUT orders.example.com /check/orders/1?x=2 ok|", req.Header.Get("X-Seen"))

	_, d = ask("nobody")
	require.NotNil(t, d)
	assert.Equal(t, http.StatusUnauthorized, d.Status)
	assert.Equal(t, "Basic", d.Header.Get("Www-Authenticate"))
	assert.Empty(t, d.Header.Get("X-Internal"), "only the headers it may pass on")
	assert.Equal(t, "who are you", string(d.Body))
	w := httptest.NewRecorder()
	d.Write(w)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, "who are you", w.Body.String())

	_, d = ask("empty")
	require.NotNil(t, d)
	assert.Equal(t, http.StatusForbidden, d.Status)
	for _, code := range []int{300, 399, 400} { // a redirect (to a login page) and a refusal pass on
		_, d = ask(strconv.Itoa(code))
		require.NotNil(t, d)
		assert.Equal(t, code, d.Status)
	}

	d = c.Check(context.Background(), "shop", []string{"nobody"}, httptest.NewRequest(http.MethodGet, "http://x/", nil))
	require.NotNil(t, d)
	assert.Equal(t, http.StatusForbidden, d.Status)
	assert.Contains(t, string(d.Body), `external authorizer "nobody" is not defined`)
}
