package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
)

// corsBackend answers every request, preflights included, with CORS
// headers of its own (as httpbin does in Kyma's tests), which the
// gateway must not let through.
func corsBackend(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, PATCH, OPTIONS")
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("X-Custom-Expose-Headers", "yes")
		_, _ = w.Write([]byte("ip"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func request(t *testing.T, srv *httptest.Server, method, host, path string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	req.Host = host
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // the gateway's answer, not where it leads
	resp, err := client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func corsHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = v
		}
	}
	return out
}

// TestAPIRuleCORSAsKymasTests: Kyma's CORS scenarios. Without corsPolicy
// no answer carries a CORS header, the Function's own removed (preflight
// included, served by a rule that allows OPTIONS); with one, a preflight
// of a path and method a rule serves is the gateway's 200, with the
// policy's headers for an allowed origin (a regex, an exact, a prefix)
// and none for another, and the Function's answers carry the policy's
// origin, credentials and exposed headers instead of their own; so do
// the answers of a rule kfn refuses and the gateway's own errors.
func TestAPIRuleCORSAsKymasTests(t *testing.T) {
	bs := newBackends()
	b := corsBackend(t)
	bs.set("shop/httpbin", strings.TrimPrefix(b.URL, "http://"))
	g, err := gateway.New(bs, gateway.Config{Egress: loopback})
	require.NoError(t, err)
	srv := httptest.NewServer(g.Exposed(http.NotFoundHandler()))
	t.Cleanup(srv.Close)

	plain := apiRule("shop", "plain", "plain.example.com", "httpbin", time.Unix(1, 0), open("/ip", "GET", "OPTIONS"))
	secret := gatewayv2.Rule{Path: "/secret", Methods: []gatewayv2.HttpMethod{"GET"}, Jwt: &gatewayv2.JwtConfig{
		Authentications: []*gatewayv2.JwtAuthentication{{Issuer: "https://issuer.example.com", JwksUri: "https://issuer.example.com/jwks"}}}}
	refused := open("/refused", "GET")
	refused.Service = &gatewayv2.Service{Name: ptr("httpbin"), IsExternal: ptr(true)}
	gone := open("/gone", "GET")
	gone.Service = &gatewayv2.Service{Name: ptr("gone")}
	custom := apiRule("shop", "custom", "custom.example.com", "httpbin", time.Unix(1, 0), open("/ip", "GET", "POST"), secret, refused, gone)
	no, age := false, uint64(300)
	custom.Spec.CorsPolicy = &gatewayv2.CorsPolicy{
		AllowOrigins:     gatewayv2.StringMatch{{"regex": ".*local.kyma.dev"}, {"exact": "https://shop.example.com"}, {"prefix": "https://admin."}},
		AllowMethods:     []string{"GET", "POST"},
		AllowHeaders:     []string{"x-custom-allow-headers"},
		AllowCredentials: &no,
		ExposeHeaders:    []string{"x-custom-expose-headers"},
		MaxAge:           &age,
	}
	status := g.SetAPIRules([]*gatewayv2.APIRule{plain, custom})
	assert.Equal(t, gatewayv2.StateWarning, status[types.NamespacedName{Namespace: "shop", Name: "custom"}].State, status)
	assert.Equal(t, gatewayv2.StateReady, status[types.NamespacedName{Namespace: "shop", Name: "plain"}].State, status)

	preflight := func(host, origin, method string) *http.Response {
		return request(t, srv, http.MethodOptions, host, "/ip", map[string]string{"Origin": origin, "Access-Control-Request-Method": method})
	}

	// No corsPolicy: no CORS header, whoever asks, the Function's removed.
	resp := preflight("plain.example.com", "localhost", "GET")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, corsHeaders(resp.Header), "a preflight without corsPolicy")
	resp = request(t, srv, http.MethodGet, "plain.example.com", "/ip", map[string]string{"Origin": "localhost"})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, corsHeaders(resp.Header), "an answer without corsPolicy")

	// A corsPolicy: the gateway answers the preflight.
	resp = preflight("custom.example.com", "test.local.kyma.dev", "GET")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, http.Header{
		"Access-Control-Allow-Origin":   {"test.local.kyma.dev"},
		"Access-Control-Allow-Methods":  {"GET,POST"},
		"Access-Control-Allow-Headers":  {"x-custom-allow-headers"},
		"Access-Control-Expose-Headers": {"x-custom-expose-headers"},
		"Access-Control-Max-Age":        {"300"},
	}, corsHeaders(resp.Header))
	assert.Equal(t, "Origin", resp.Header.Get("Vary"))
	for _, origin := range []string{"https://shop.example.com", "https://admin.example.com"} {
		resp = preflight("custom.example.com", origin, "POST")
		assert.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"), "an exact and a prefix")
	}
	for _, origin := range []string{"localhost", "https://shop.example.com.evil", "evil.local.kyma.dev.attacker"} {
		resp = preflight("custom.example.com", origin, "GET")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, corsHeaders(resp.Header), origin+": not an allowed origin (the regex matches the whole origin)")
	}
	resp = preflight("custom.example.com", "test.local.kyma.dev", "DELETE")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a preflight for a method no rule serves")

	// The Function's answers carry the policy's headers, not its own.
	resp = request(t, srv, http.MethodGet, "custom.example.com", "/ip", map[string]string{"Origin": "a.local.kyma.dev"})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, http.Header{
		"Access-Control-Allow-Origin":   {"a.local.kyma.dev"},
		"Access-Control-Expose-Headers": {"x-custom-expose-headers"},
	}, corsHeaders(resp.Header), "allowCredentials false: the Function's true removed")
	resp = request(t, srv, http.MethodGet, "custom.example.com", "/ip", map[string]string{"Origin": "localhost"})
	assert.Empty(t, corsHeaders(resp.Header), "an origin not allowed")
	resp = request(t, srv, http.MethodGet, "custom.example.com", "/ip", nil)
	assert.Empty(t, corsHeaders(resp.Header), "no origin")
	assert.Equal(t, "yes", resp.Header.Get("X-Custom-Expose-Headers"), "the Function's other headers stay")

	// A refusal carries the policy's headers: the page reads why.
	resp = request(t, srv, http.MethodGet, "custom.example.com", "/secret", map[string]string{"Origin": "a.local.kyma.dev"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "no token")
	assert.Equal(t, "a.local.kyma.dev", resp.Header.Get("Access-Control-Allow-Origin"))
	resp = request(t, srv, http.MethodGet, "custom.example.com", "/refused", map[string]string{"Origin": "a.local.kyma.dev"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a rule kfn refuses")
	assert.Equal(t, "a.local.kyma.dev", resp.Header.Get("Access-Control-Allow-Origin"))
	// So does the gateway's own error (here 404: no such Function).
	resp = request(t, srv, http.MethodGet, "custom.example.com", "/gone", map[string]string{"Origin": "a.local.kyma.dev"})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no Function gone")
	assert.Equal(t, "a.local.kyma.dev", resp.Header.Get("Access-Control-Allow-Origin"))
}

// TestAPIRuleCORSPoliciesKfnCannotApplyAreErrors: an allowOrigins entry
// that is not one of exact, prefix or regex, a regex that does not
// compile, an over-long one, or a list value that cannot be in a header
// makes the APIRule an Error that says why, serving nothing.
func TestAPIRuleCORSPoliciesKfnCannotApplyAreErrors(t *testing.T) {
	tests := map[string]struct {
		policy gatewayv2.CorsPolicy
		why    string
	}{
		"two kinds":        {gatewayv2.CorsPolicy{AllowOrigins: gatewayv2.StringMatch{{"exact": "a", "prefix": "b"}}}, "allowOrigins[0]: one of exact, prefix or regex"},
		"unknown kind":     {gatewayv2.CorsPolicy{AllowOrigins: gatewayv2.StringMatch{{"glob": "*"}}}, `allowOrigins[0]: "glob" is not exact, prefix or regex`},
		"bad regex":        {gatewayv2.CorsPolicy{AllowOrigins: gatewayv2.StringMatch{{"regex": "(("}}}, "allowOrigins[0]: error parsing regexp"},
		"long regex":       {gatewayv2.CorsPolicy{AllowOrigins: gatewayv2.StringMatch{{"regex": strings.Repeat("a", 1025)}}}, "allowOrigins[0]: longer than 1024 bytes"},
		"header injection": {gatewayv2.CorsPolicy{AllowHeaders: []string{"x\r\nSet-Cookie: a=b"}}, "corsPolicy.allowHeaders[0]"},
		"a comma":          {gatewayv2.CorsPolicy{ExposeHeaders: []string{"a,b"}}, "corsPolicy.exposeHeaders[0]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g, srv, b := exposedOrders(t, gateway.Config{}, false)
			r := apiRule("shop", "orders", "orders.example.com", "orders", time.Unix(1, 0), open("/*", "GET"))
			r.Spec.CorsPolicy = &tc.policy
			got := g.SetAPIRules([]*gatewayv2.APIRule{r})[types.NamespacedName{Namespace: "shop", Name: "orders"}]
			assert.Equal(t, gatewayv2.StateError, got.State)
			assert.Contains(t, got.Description, tc.why)
			code, _ := call(t, srv, http.MethodGet, "orders.example.com", "/")
			assert.Equal(t, http.StatusNotFound, code, "an APIRule in Error serves nothing")
			assert.Nil(t, b.last.Load())
		})
	}
}

func ptr[T any](v T) *T { return &v }
