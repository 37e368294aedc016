package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/extauth"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/test/jwttest"
)

// apiRule builds an APIRule of namespace/name exposing service on host,
// with rules.
func apiRule(namespace, name, host, service string, created time.Time, rules ...gatewayv2.Rule) *gatewayv2.APIRule {
	h := gatewayv2.Host(host)
	port := uint32(80)
	return &gatewayv2.APIRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       gatewayv2.APIRuleSpec{Hosts: []*gatewayv2.Host{&h}, Service: &gatewayv2.Service{Name: &service, Port: &port}, Rules: rules},
	}
}

func open(path string, methods ...gatewayv2.HttpMethod) gatewayv2.Rule {
	yes := true
	return gatewayv2.Rule{Path: path, Methods: methods, NoAuth: &yes}
}

// seen is a backend that records the last request's path, headers and
// cookies.
type seen struct {
	*httptest.Server
	last atomic.Pointer[http.Request]
}

func newSeen(t *testing.T) *seen {
	s := &seen{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.last.Store(r)
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

// exposedOrders is a gateway with cfg (and loopback egress) serving
// APIRules on a test server, in front of the gateway's own routing when
// own (else 404), and the backend of Function shop/orders.
func exposedOrders(t *testing.T, cfg gateway.Config, own bool) (*gateway.Gateway, *httptest.Server, *seen) {
	t.Helper()
	bs := newBackends()
	b := newSeen(t)
	bs.set("shop/orders", strings.TrimPrefix(b.URL, "http://"))
	cfg.Egress = loopback
	g, err := gateway.New(bs, cfg)
	require.NoError(t, err)
	var next http.Handler = http.NotFoundHandler()
	if own {
		next = g
	}
	srv := httptest.NewServer(g.Exposed(next))
	t.Cleanup(srv.Close)
	return g, srv, b
}

func call(t *testing.T, srv *httptest.Server, method, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAPIRulesServeTheirHostsByRule: Kyma's tutorial APIRule (a short
// host, noAuth) and one with ordered rules reach their Functions with
// the path as asked, whoever calls (no Kubernetes identity: the rule's
// access strategy decides); a method or path no rule has is 404, a host
// no APIRule has goes to the gateway's own routing, a jwt rule kfn cannot
// apply refuses (failing closed) and the APIRule is a Warning that says so.
func TestAPIRulesServeTheirHostsByRule(t *testing.T) {
	bs := newBackends()
	orders, admin := newSeen(t), newSeen(t)
	bs.set("shop/orders", strings.TrimPrefix(orders.URL, "http://"))
	bs.set("shop/admin", strings.TrimPrefix(admin.URL, "http://"))
	g, err := gateway.New(bs, gateway.Config{Egress: loopback, APIRuleDomain: "localhost"}, gateway.WithAccess(denyAll{}))
	require.NoError(t, err)
	srv := httptest.NewServer(g.Exposed(g))
	t.Cleanup(srv.Close)

	jwt := gatewayv2.Rule{Path: "/secret", Methods: []gatewayv2.HttpMethod{"GET"}, Jwt: &gatewayv2.JwtConfig{}}
	adminRule := open("/admin/{**}", "GET")
	adminName := "admin"
	adminRule.Service = &gatewayv2.Service{Name: &adminName}
	adminRule.Request = &gatewayv2.Request{Headers: map[string]string{"X-Tenant": "shop"}, Cookies: map[string]string{"tenant": "shop"}}
	status := g.SetAPIRules([]*gatewayv2.APIRule{
		apiRule("shop", "orders", "orders", "orders", time.Unix(1, 0), jwt, adminRule, open("/orders/{*}", "GET", "POST"), open("/*", "GET")),
	})
	assert.Equal(t, gateway.APIRuleStatus{State: gatewayv2.StateWarning, Description: "rule 0 (/secret) refuses every request: jwt: no authentications"},
		status[types.NamespacedName{Namespace: "shop", Name: "orders"}])

	code, body := call(t, srv, http.MethodPost, "orders.localhost:8080", "/orders/42")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hello from /orders/42", body)
	code, body = call(t, srv, http.MethodGet, "ORDERS.localhost", "/anything/else")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hello from /anything/else", body, "/* after the others")

	code, body = call(t, srv, http.MethodGet, "orders.localhost", "/admin/users/1")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hello from /admin/users/1", body, "the rule's own service")
	got := admin.last.Load()
	require.NotNil(t, got)
	assert.Equal(t, "shop", got.Header.Get("X-Tenant"))
	c, err := got.Cookie("tenant")
	require.NoError(t, err)
	assert.Equal(t, "shop", c.Value)

	code, body = call(t, srv, http.MethodDelete, "orders.localhost", "/orders/42")
	assert.Equal(t, http.StatusNotFound, code, "a method no rule of the path has")
	assert.Contains(t, body, "no rule of APIRule shop/orders serves DELETE /orders/42")
	code, body = call(t, srv, http.MethodGet, "orders.localhost", "/secret")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "rule 0 of APIRule shop/orders refuses every request: jwt: no authentications")
	code, _ = call(t, srv, http.MethodGet, "orders.localhost", "/orders/../secret")
	assert.Equal(t, http.StatusNotFound, code, "a path not in canonical form matches no rule")

	code, body = call(t, srv, http.MethodGet, "localhost", "/shop/orders/x")
	assert.Equal(t, http.StatusForbidden, code, "another host: the gateway's routing, with its access")
	assert.Contains(t, body, "denied")
}

// TestAPIRulesStayInTheirTenant: a host belongs to the oldest APIRule
// that has it (the other is an Error that names it, and serves nothing);
// an APIRule may not expose another namespace's Service, a Service name
// of the cluster's, nor every short host; headers HTTP or kfn own cannot
// be set.
func TestAPIRulesStayInTheirTenant(t *testing.T) {
	bs := newBackends()
	victim, thief := newSeen(t), newSeen(t)
	bs.set("bank/pay", strings.TrimPrefix(victim.URL, "http://"))
	bs.set("mallory/pay", strings.TrimPrefix(thief.URL, "http://"))
	g, err := gateway.New(bs, gateway.Config{Egress: loopback, APIRuleDomain: "localhost"})
	require.NoError(t, err)
	srv := httptest.NewServer(g.Exposed(http.NotFoundHandler()))
	t.Cleanup(srv.Close)

	other := open("/*", "GET")
	bank := "bank"
	otherName := "pay"
	other.Service = &gatewayv2.Service{Name: &otherName, Namespace: &bank}
	hostile := open("/*", "GET")
	hostile.Request = &gatewayv2.Request{Headers: map[string]string{"x-kfn-sender": "bank"}}
	status := g.SetAPIRules([]*gatewayv2.APIRule{
		apiRule("mallory", "late", "pay.example.com", "pay", time.Unix(2, 0), open("/*", "GET")),
		apiRule("bank", "pay", "pay.example.com", "pay", time.Unix(1, 0), open("/*", "GET")),
		apiRule("mallory", "cross", "cross.example.com", "pay", time.Unix(3, 0), other),
		apiRule("mallory", "svc", "pay.bank.svc.cluster.local", "pay", time.Unix(3, 0), open("/*", "GET")),
		apiRule("mallory", "wild", "*.cluster.local", "pay", time.Unix(3, 0), open("/*", "GET")),
		apiRule("mallory", "all", "*.localhost", "pay", time.Unix(3, 0), open("/*", "GET")),
		apiRule("mallory", "spoof", "spoof.example.com", "pay", time.Unix(3, 0), hostile),
	})
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	assert.Equal(t, gatewayv2.StateReady, status[key("bank", "pay")].State)
	assert.Equal(t, gatewayv2.StateError, status[key("mallory", "late")].State)
	assert.Contains(t, status[key("mallory", "late")].Description, "pay.example.com is held by APIRule bank/pay")
	assert.Contains(t, status[key("mallory", "cross")].Description, "kfn exposes Services of the APIRule's namespace only, not of bank")
	assert.Contains(t, status[key("mallory", "svc")].Description, "names cluster Services")
	assert.Contains(t, status[key("mallory", "wild")].Description, "names cluster Services")
	assert.Contains(t, status[key("mallory", "all")].Description, "would take every short host")
	assert.Contains(t, status[key("mallory", "spoof")].Description, `request.headers: "x-kfn-sender" cannot be set`)

	code, body := call(t, srv, http.MethodGet, "pay.example.com", "/")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Nil(t, thief.last.Load(), "the thief's Function got nothing")
	code, _ = call(t, srv, http.MethodGet, "cross.example.com", "/")
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = call(t, srv, http.MethodGet, "spoof.example.com", "/")
	assert.Equal(t, http.StatusForbidden, code)
	for _, host := range []string{"pay.bank.svc.cluster.local", "x.cluster.local", "pay.localhost"} {
		code, _ = call(t, srv, http.MethodGet, host, "/")
		assert.Equal(t, http.StatusNotFound, code, host+": not an APIRule's")
	}
	assert.Nil(t, thief.last.Load(), "nothing reached mallory's Function")

	// The APIRules go: their hosts are the gateway's routing again.
	assert.Empty(t, g.SetAPIRules(nil))
	code, _ = call(t, srv, http.MethodGet, "pay.example.com", "/")
	assert.Equal(t, http.StatusNotFound, code)
}

// denyAll refuses every caller, as the gateway's Kubernetes access would
// refuse an anonymous one.
type denyAll struct{}

func (denyAll) Allow(*http.Request, auth.Attributes) error { return errors.New("denied") }

// TestAPIRuleRulesKfnCannotServeRefuseEveryRequest: a rule kfn cannot
// serve as written answers 403, failing closed, and its APIRule is a
// Warning that says why.
func TestAPIRuleRulesKfnCannotServeRefuseEveryRequest(t *testing.T) {
	yes, shop, fn, huge := true, "shop", "orders", uint32(1<<32-1)
	tests := map[string]struct {
		change func(*gatewayv2.Rule)
		why    string
	}{
		"external service": {func(r *gatewayv2.Rule) { r.Service = &gatewayv2.Service{Name: &fn, IsExternal: &yes} }, "kfn exposes Services of the cluster only"},
		"no service name":  {func(r *gatewayv2.Rule) { r.Service = &gatewayv2.Service{Namespace: &shop} }, "no service"},
		"no port":          {func(r *gatewayv2.Rule) { r.Service = &gatewayv2.Service{Name: &fn, Port: &huge} }, "port 4294967295 is no port"},
		"extAuth": {func(r *gatewayv2.Rule) {
			r.NoAuth = nil
			r.ExtAuth = &gatewayv2.ExtAuth{ExternalAuthorizers: []string{"oauth2-proxy"}}
		}, `extAuth: authorizer "oauth2-proxy" is not defined`},
		"a Host header": {func(r *gatewayv2.Rule) { r.Request = &gatewayv2.Request{Headers: map[string]string{"host": "bank"}} }, `request.headers: "host" cannot be set`},
		"a header with a line": {func(r *gatewayv2.Rule) {
			r.Request = &gatewayv2.Request{Headers: map[string]string{"X-A": "b\r\nX-Kfn-Sender: bank"}}
		}, `request.headers: "X-A" cannot be set`},
		"a cookie with a ;": {func(r *gatewayv2.Rule) { r.Request = &gatewayv2.Request{Cookies: map[string]string{"a": "b; admin=1"}} }, `request.cookies: "a"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g, srv, b := exposedOrders(t, gateway.Config{}, false)
			rule := open("/*", "GET")
			tc.change(&rule)
			st := g.SetAPIRules([]*gatewayv2.APIRule{apiRule("shop", "orders", "orders.example.com", "orders", time.Unix(1, 0), rule)})
			got := st[types.NamespacedName{Namespace: "shop", Name: "orders"}]
			assert.Equal(t, gatewayv2.StateWarning, got.State)
			assert.Contains(t, got.Description, "rule 0 (/*) refuses every request: "+tc.why)
			code, body := call(t, srv, http.MethodGet, "orders.example.com", "/")
			assert.Equal(t, http.StatusForbidden, code)
			assert.Contains(t, body, tc.why)
			assert.Nil(t, b.last.Load(), "nothing reached the Function")
		})
	}
}

// TestAPIRuleTimeouts: a rule's timeout overrides the APIRule's, which
// overrides Kyma's default of 180 s; a Function that does not answer
// within it is answered 504.
func TestAPIRuleTimeouts(t *testing.T) {
	bs := newBackends()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	bs.set("shop/orders", strings.TrimPrefix(slow.URL, "http://"))
	g, err := gateway.New(bs, gateway.Config{Egress: loopback})
	require.NoError(t, err)
	srv := httptest.NewServer(g.Exposed(http.NotFoundHandler()))
	t.Cleanup(srv.Close)
	one, hour := gatewayv2.Timeout(1), gatewayv2.Timeout(3600)
	fast := open("/fast", "GET")
	fast.Timeout = &one
	r := apiRule("shop", "orders", "orders.example.com", "orders", time.Unix(1, 0), fast)
	r.Spec.Timeout = &hour
	assert.Equal(t, gatewayv2.StateReady, g.SetAPIRules([]*gatewayv2.APIRule{r})[types.NamespacedName{Namespace: "shop", Name: "orders"}].State)
	start := time.Now()
	code, body := call(t, srv, http.MethodGet, "orders.example.com", "/fast")
	assert.Equal(t, http.StatusGatewayTimeout, code, body)
	assert.Less(t, time.Since(start), 9*time.Second, "the rule's 1 s, not the APIRule's hour")
}

// TestAPIRuleJWTAsKymasTests: a jwt rule (Kyma's tutorial: an issuer and
// its jwksUri, a required scope) answers 403 without a token, 401 with a
// token that does not verify (and says how to authenticate), 403 with one
// that lacks the scope, and lets a valid one through, without the token;
// the namespace's jwt rules may name only so many key sets.
func TestAPIRuleJWTAsKymasTests(t *testing.T) {
	is := jwttest.NewIssuer(t)
	g, srv, b := exposedOrders(t, gateway.Config{}, false)
	jwtRule := func(path string, scopes ...string) gatewayv2.Rule {
		return gatewayv2.Rule{Path: path, Methods: []gatewayv2.HttpMethod{"GET"}, Jwt: &gatewayv2.JwtConfig{
			Authentications: []*gatewayv2.JwtAuthentication{{Issuer: is.URL(), JwksUri: is.JWKS()}},
			Authorizations:  []*gatewayv2.JwtAuthorization{{RequiredScopes: scopes}},
		}}
	}
	r := apiRule("shop", "orders", "orders.example.com", "orders", time.Unix(1, 0), jwtRule("/read", "read"), jwtRule("/admin", "admin"))
	assert.Equal(t, gatewayv2.StateReady, g.SetAPIRules([]*gatewayv2.APIRule{r})[types.NamespacedName{Namespace: "shop", Name: "orders"}].State)

	get := func(path, token string) *http.Response {
		h := map[string]string{}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		return request(t, srv, http.MethodGet, "orders.example.com", path, h)
	}
	assert.Equal(t, http.StatusForbidden, get("/read", "").StatusCode, "no token")
	resp := get("/read", jwttest.NewIssuer(t).Token(map[string]any{"scope": "read"}))
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "another issuer's token")
	assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
	token := is.Token(map[string]any{"scope": "read"})
	assert.Equal(t, http.StatusForbidden, get("/admin", token).StatusCode, "a scope it lacks")
	assert.Nil(t, b.last.Load(), "nothing reached the Function")
	resp = get("/read", token)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, b.last.Load())
	assert.Empty(t, b.last.Load().Header.Get("Authorization"), "the token is not forwarded")

	// Past the namespace's key sets, a rule refuses every request.
	rules := make([]gatewayv2.Rule, 0, gateway.MaxJWKSPerNamespace+1)
	for i := range gateway.MaxJWKSPerNamespace + 1 {
		rule := jwtRule(fmt.Sprintf("/r%d", i))
		rule.Jwt.Authentications[0].JwksUri = fmt.Sprintf("%s/jwks/%d", is.URL(), i)
		rules = append(rules, rule)
	}
	st := g.SetAPIRules([]*gatewayv2.APIRule{apiRule("shop", "many", "many.example.com", "orders", time.Unix(1, 0), rules...)})
	got := st[types.NamespacedName{Namespace: "shop", Name: "many"}]
	assert.Equal(t, gatewayv2.StateWarning, got.State)
	assert.Equal(t, fmt.Sprintf("rule %d (/r%d) refuses every request: the namespace's jwt rules name more than 8 jwksUris", gateway.MaxJWKSPerNamespace, gateway.MaxJWKSPerNamespace), got.Description)

	// The oldest APIRules keep their key sets, whatever order they come in.
	late := jwtRule("/late")
	late.Jwt.Authentications[0].JwksUri = is.URL() + "/jwks/late"
	st = g.SetAPIRules([]*gatewayv2.APIRule{
		apiRule("shop", "newer", "newer.example.com", "orders", time.Unix(2, 0), late),
		apiRule("shop", "many", "many.example.com", "orders", time.Unix(1, 0), rules[:gateway.MaxJWKSPerNamespace]...),
	})
	assert.Equal(t, gatewayv2.StateReady, st[types.NamespacedName{Namespace: "shop", Name: "many"}].State)
	assert.Contains(t, st[types.NamespacedName{Namespace: "shop", Name: "newer"}].Description, "more than 8 jwksUris")
}

// TestAPIRuleExtAuthAsIstiosProviders: an extAuth rule asks its
// authorizer (the operator's, by name) about each request, with its
// method, path and query after the authorizer's path, its Host and the
// headers it names, no body: 200 lets the request through with the
// headers the authorizer adds; a refusal is the client's answer (status,
// the headers it may pass, the body); an authorizer that does not answer
// in time refuses; restrictions also need a valid token.
func TestAPIRuleExtAuthAsIstiosProviders(t *testing.T) {
	var asked atomic.Pointer[http.Request]
	authz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r)
		switch r.Header.Get("Cookie") {
		case "session=good":
			w.Header().Set("X-User", "alice")
			w.Header().Set("X-Not-Passed", "no")
		case "session=slow":
			<-r.Context().Done()
		default:
			w.Header().Set("Location", "https://login.example.com/")
			w.Header().Set("X-Internal", "no")
			w.WriteHeader(http.StatusFound)
			_, _ = io.WriteString(w, "log in first")
		}
	}))
	t.Cleanup(authz.Close)
	is := jwttest.NewIssuer(t)
	g, srv, b := exposedOrders(t, gateway.Config{Authorizers: []extauth.Authorizer{{
		Name: "oauth2-proxy", URL: authz.URL + "/oauth2/auth", Timeout: extauth.Duration(300 * time.Millisecond),
		IncludeRequestHeaders: []string{"cookie"}, HeadersToUpstream: []string{"x-user"},
	}}}, false)
	ext := gatewayv2.Rule{Path: "/{**}", Methods: []gatewayv2.HttpMethod{"GET", "POST"}, ExtAuth: &gatewayv2.ExtAuth{ExternalAuthorizers: []string{"oauth2-proxy"}}}
	restricted := gatewayv2.Rule{Path: "/strict", Methods: []gatewayv2.HttpMethod{"GET"}, ExtAuth: &gatewayv2.ExtAuth{
		ExternalAuthorizers: []string{"oauth2-proxy"},
		Restrictions:        &gatewayv2.JwtConfig{Authentications: []*gatewayv2.JwtAuthentication{{Issuer: is.URL(), JwksUri: is.JWKS()}}},
	}}
	r := apiRule("shop", "orders", "orders.example.com", "orders", time.Unix(1, 0), restricted, ext)
	assert.Equal(t, gatewayv2.StateReady, g.SetAPIRules([]*gatewayv2.APIRule{r})[types.NamespacedName{Namespace: "shop", Name: "orders"}].State)

	resp := request(t, srv, http.MethodPost, "orders.example.com", "/orders/1?x=1", map[string]string{"Cookie": "session=good", "X-Secret": "s"})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	got := asked.Load()
	require.NotNil(t, got)
	assert.Equal(t, http.MethodPost, got.Method)
	assert.Equal(t, "/oauth2/auth/orders/1?x=1", got.URL.RequestURI())
	assert.Equal(t, "orders.example.com", got.Host)
	assert.Empty(t, got.Header.Get("X-Secret"), "only the headers it names")
	request(t, srv, http.MethodGet, "orders.example.com", "/files/a%2F..%2Fadmin", map[string]string{"Cookie": "session=good"})
	assert.Equal(t, "/oauth2/auth/files/a%2F..%2Fadmin", asked.Load().RequestURI, "the path escaped as the Function gets it")
	fn := b.last.Load()
	require.NotNil(t, fn)
	assert.Equal(t, "alice", fn.Header.Get("X-User"), "the header the authorizer adds")
	assert.Empty(t, fn.Header.Get("X-Not-Passed"))

	b.last.Store(nil)
	resp = request(t, srv, http.MethodGet, "orders.example.com", "/orders/1", nil)
	assert.Equal(t, http.StatusFound, resp.StatusCode, "the authorizer's refusal")
	assert.Equal(t, "https://login.example.com/", resp.Header.Get("Location"))
	assert.Empty(t, resp.Header.Get("X-Internal"))
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "log in first", string(body))
	resp = request(t, srv, http.MethodGet, "orders.example.com", "/orders/1", map[string]string{"Cookie": "session=slow"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "an authorizer that does not answer in time refuses")
	assert.Nil(t, b.last.Load(), "nothing reached the Function")

	resp = request(t, srv, http.MethodGet, "orders.example.com", "/strict", map[string]string{"Cookie": "session=good"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "restrictions: no token")
	resp = request(t, srv, http.MethodGet, "orders.example.com", "/strict", map[string]string{"Cookie": "session=good", "Authorization": "Bearer " + is.Token(nil)})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "an allowed request with a valid token")
}

// TestAnEscapedSlashStaysEscaped: a path a rule matched with an escaped
// "/" (one segment of /public/{*}) reaches the Function escaped as it
// came, not decoded into segments a rule never allowed
// (/public/a/../admin); so does one through the gateway's own routing.
func TestAnEscapedSlashStaysEscaped(t *testing.T) {
	g, srv, b := exposedOrders(t, gateway.Config{}, true)
	g.SetAPIRules([]*gatewayv2.APIRule{apiRule("shop", "orders", "orders.example.com", "orders", time.Unix(1, 0), open("/public/{*}", "GET"))})

	code, body := call(t, srv, http.MethodGet, "orders.example.com", "/public/a%2F..%2Fadmin")
	require.Equal(t, http.StatusOK, code, body)
	got := b.last.Load()
	require.NotNil(t, got)
	assert.Equal(t, "/public/a%2F..%2Fadmin", got.RequestURI, "escaped as it came")
	code, body = call(t, srv, http.MethodGet, "orders.example.com", "/public/a/../admin")
	assert.Equal(t, http.StatusNotFound, code, "the decoded form is no path of the rule: %s", body)

	code, body = call(t, srv, http.MethodGet, "orders.shop.svc.cluster.local", "/files/a%2Fb?x=1")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "/files/a%2Fb?x=1", b.last.Load().RequestURI, "by host")
	code, body = call(t, srv, http.MethodGet, "localhost", "/shop/orders/files/a%2Fb")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "/files/a%2Fb", b.last.Load().RequestURI, "by path")
	code, body = call(t, srv, http.MethodGet, "localhost", "/shop/orders")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "/", b.last.Load().RequestURI)
}

// services are backends that also reach Services that are not Functions'
// (gateway.Services), by namespace/name:port; the cluster's
// (eventbridge.ClusterBackends) are tested against a real API server in
// package eventbridge.
type services struct {
	*backends
	addrs map[string]string // namespace/name:port -> host:port; "" for no ready endpoint
}

func (s services) ServiceAddr(_ context.Context, namespace, name string, port int32) (string, error) {
	addr, ok := s.addrs[fmt.Sprintf("%s/%s:%d", namespace, name, port)]
	switch {
	case !ok:
		return "", fmt.Errorf("%w: the Service has no port %d", gateway.ErrNoService, port)
	case addr == "":
		return "", errors.New("no ready endpoint")
	}
	return addr, nil
}

// TestAPIRuleExposesAServiceThatIsNotAFunction: a rule whose Service is
// not a Function's, or names another port than a Function's 80, reaches
// that port of the Service at once (its path as asked), through
// gateway.Services; a Service or port that does not exist is 404, one
// without a ready endpoint 503 with Retry-After (not held: kfn does not
// wake it), and a gateway whose backends reach Functions only answers
// 404.
func TestAPIRuleExposesAServiceThatIsNotAFunction(t *testing.T) {
	bs := newBackends()
	fn, legacy := newSeen(t), newSeen(t)
	bs.set("shop/orders", strings.TrimPrefix(fn.URL, "http://"))
	svc := services{backends: bs, addrs: map[string]string{
		"shop/legacy:8080": strings.TrimPrefix(legacy.URL, "http://"),
		"shop/orders:9090": strings.TrimPrefix(legacy.URL, "http://"), // the Function's Service, another port
		"shop/idle:8080":   "",
	}}
	g, err := gateway.New(svc, gateway.Config{Egress: loopback})
	require.NoError(t, err)
	srv := httptest.NewServer(g.Exposed(http.NotFoundHandler()))
	t.Cleanup(srv.Close)

	to := func(rule gatewayv2.Rule, name string, port uint32) gatewayv2.Rule {
		rule.Service = &gatewayv2.Service{Name: &name, Port: &port}
		return rule
	}
	a := apiRule("shop", "app", "app.example.com", "orders", time.Unix(1, 0),
		to(open("/legacy/{**}", "GET"), "legacy", 8080),
		to(open("/metrics", "GET"), "orders", 9090),
		to(open("/idle", "GET"), "idle", 8080),
		to(open("/gone", "GET"), "gone", 8080),
		to(open("/wrong-port", "GET"), "legacy", 80),
		open("/{**}", "GET"))
	st := g.SetAPIRules([]*gatewayv2.APIRule{a})
	assert.Equal(t, gatewayv2.StateReady, st[types.NamespacedName{Namespace: "shop", Name: "app"}].State)

	code, body := call(t, srv, http.MethodGet, "app.example.com", "/legacy/a/b")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hello from /legacy/a/b", body)
	code, body = call(t, srv, http.MethodGet, "app.example.com", "/metrics")
	assert.Equal(t, http.StatusOK, code, "the Function's Service's port 9090 is the Service's: %s", body)
	assert.Nil(t, fn.last.Load(), "not the Function's port 80")
	code, body = call(t, srv, http.MethodGet, "app.example.com", "/orders")
	assert.Equal(t, http.StatusOK, code, "port 80 of a Function: the Function: %s", body)
	assert.NotNil(t, fn.last.Load())

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/idle", nil)
	require.NoError(t, err)
	req.Host = "app.example.com"
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	idle, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(idle), "service shop/idle port 8080: no ready endpoint")
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
	for path, why := range map[string]string{"/gone": "service shop/gone port 8080: no such Service", "/wrong-port": "service shop/legacy port 80: no such Service: the Service has no port 80"} {
		code, body = call(t, srv, http.MethodGet, "app.example.com", path)
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.Contains(t, body, why, path)
	}

	g, srv, b := exposedOrders(t, gateway.Config{}, false)
	g.SetAPIRules([]*gatewayv2.APIRule{apiRule("shop", "app", "app.example.com", "orders", time.Unix(1, 0), to(open("/{**}", "GET"), "orders", 8080))})
	code, body = call(t, srv, http.MethodGet, "app.example.com", "/")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "no function shop/orders", "backends of Functions only")
	assert.Nil(t, b.last.Load())
}

// TestRoutesListTheServedRules: Routes lists every rule of the APIRules
// served, in order, with their hosts (a short one in its domain), the
// Service and port they reach, their access strategy, and why a rule
// refuses when it does; an APIRule not served (its host taken) has none.
func TestRoutesListTheServedRules(t *testing.T) {
	g, _, _ := exposedOrders(t, gateway.Config{APIRuleDomain: "local.kyma.dev"}, false)
	legacy, port := "legacy", uint32(8080)
	secret := gatewayv2.Rule{Path: "/secret", Methods: []gatewayv2.HttpMethod{"GET"}, Jwt: &gatewayv2.JwtConfig{
		Authentications: []*gatewayv2.JwtAuthentication{{Issuer: "https://issuer.example.com", JwksUri: "https://issuer.example.com/jwks"}}}}
	ext := gatewayv2.Rule{Path: "/admin", Methods: []gatewayv2.HttpMethod{"POST"}, ExtAuth: &gatewayv2.ExtAuth{ExternalAuthorizers: []string{"nobody"}}}
	old := open("/old/{**}", "GET", "POST")
	old.Service = &gatewayv2.Service{Name: &legacy, Port: &port}
	g.SetAPIRules([]*gatewayv2.APIRule{
		apiRule("shop", "orders", "orders", "orders", time.Unix(1, 0), secret, ext, old, open("/{**}", "GET")),
		apiRule("other", "late", "orders", "orders", time.Unix(2, 0), open("/{**}", "GET")),
	})
	hosts := []string{"orders.local.kyma.dev"}
	key := types.NamespacedName{Namespace: "shop", Name: "orders"}
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	assert.Equal(t, []gateway.ExposedRoute{
		{APIRule: key, Index: 0, Hosts: hosts, Path: "/secret", Methods: []string{"GET"}, Service: fn, Port: 80, Access: "jwt"},
		{APIRule: key, Index: 1, Hosts: hosts, Path: "/admin", Methods: []string{"POST"}, Service: fn, Port: 80, Access: "extAuth",
			Refused: `extAuth: authorizer "nobody" is not defined (the chart's eventbridge.gateway.authorizers)`},
		{APIRule: key, Index: 2, Hosts: hosts, Path: "/old/{**}", Methods: []string{"GET", "POST"},
			Service: types.NamespacedName{Namespace: "shop", Name: "legacy"}, Port: 8080, Access: "noAuth"},
		{APIRule: key, Index: 3, Hosts: hosts, Path: "/{**}", Methods: []string{"GET"}, Service: fn, Port: 80, Access: "noAuth"},
	}, g.Routes())
}
