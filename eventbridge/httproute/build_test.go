package httproute_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/httproute"
)

var parent = httproute.Parent{Namespace: "gateways", Name: "public", SectionName: "https"}

func apiRule(rules ...gatewayv2.Rule) *gatewayv2.APIRule {
	host := gatewayv2.Host("orders")
	svc := "orders"
	return &gatewayv2.APIRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-1"},
		Spec:       gatewayv2.APIRuleSpec{Hosts: []*gatewayv2.Host{&host}, Service: &gatewayv2.Service{Name: &svc}, Rules: rules},
	}
}

func noAuth(path string, methods ...gatewayv2.HttpMethod) gatewayv2.Rule {
	return gatewayv2.Rule{Path: path, Methods: methods, NoAuth: ptr.To(true)}
}

func path(m *gatewayapiv1.HTTPPathMatch) string { return string(*m.Type) + " " + *m.Value }

// Kyma's rule paths, methods, the service, timeouts and request headers
// become the HTTPRoute's matches, backend, timeouts and header filter; the
// route is the APIRule's (name, owner, labels) on the Gateway named, for
// the short host in the domain.
func TestBuildWritesWhatAnHTTPRouteCanSay(t *testing.T) {
	one := gatewayv2.Timeout(5)
	fast := noAuth("/orders/{*}", "GET", "POST")
	fast.Timeout = &one
	headers := noAuth("/health", "GET")
	headers.Request = &gatewayv2.Request{Headers: map[string]string{"x-tenant": "shop", "X-A": "b"}}
	a := apiRule(fast, headers, noAuth("/files/{**}", "GET"), noAuth("/*", "GET"))
	route, notes := httproute.Build(a, parent, "local.kyma.dev")

	assert.Equal(t, "orders", route.Name)
	assert.Equal(t, "shop", route.Namespace)
	assert.Equal(t, map[string]string{httproute.ManagedBy: "kfn", httproute.APIRuleLabel: "orders"}, route.Labels)
	require.Len(t, route.OwnerReferences, 1)
	assert.Equal(t, "APIRule", route.OwnerReferences[0].Kind)
	assert.EqualValues(t, "uid-1", route.OwnerReferences[0].UID)
	assert.Equal(t, []gatewayapiv1.Hostname{"orders.local.kyma.dev"}, route.Spec.Hostnames)
	require.Len(t, route.Spec.ParentRefs, 1)
	assert.EqualValues(t, "public", route.Spec.ParentRefs[0].Name)
	assert.EqualValues(t, "gateways", *route.Spec.ParentRefs[0].Namespace)
	assert.EqualValues(t, "https", *route.Spec.ParentRefs[0].SectionName)

	require.Len(t, route.Spec.Rules, 4)
	r := route.Spec.Rules[0]
	require.Len(t, r.Matches, 2, "one match per method")
	assert.Equal(t, "RegularExpression /orders/[^/]+", path(r.Matches[0].Path))
	assert.EqualValues(t, "GET", *r.Matches[0].Method)
	assert.EqualValues(t, "POST", *r.Matches[1].Method)
	assert.EqualValues(t, "5s", *r.Timeouts.Request, "the rule's timeout")
	assert.EqualValues(t, "orders", r.BackendRefs[0].Name)
	assert.EqualValues(t, 80, *r.BackendRefs[0].Port)

	r = route.Spec.Rules[1]
	assert.Equal(t, "Exact /health", path(r.Matches[0].Path))
	assert.EqualValues(t, "180s", *r.Timeouts.Request, "Kyma's default")
	require.Len(t, r.Filters, 1)
	assert.Equal(t, []gatewayapiv1.HTTPHeader{{Name: "X-A", Value: "b"}, {Name: "X-Tenant", Value: "shop"}}, r.Filters[0].RequestHeaderModifier.Set)
	assert.Equal(t, "RegularExpression /files/.*", path(route.Spec.Rules[2].Matches[0].Path))
	assert.Equal(t, "PathPrefix /", path(route.Spec.Rules[3].Matches[0].Path))
	assert.Equal(t, []string{"the Gateway orders the rules' matches by how specific they are (Gateway API), not as listed"}, notes)
}

// What an HTTPRoute cannot enforce is left out, fail closed (the Gateway
// answers it as unrouted), and said: jwt, extAuth, request cookies, a
// Service of another namespace or outside the cluster; CORS origins by
// prefix or regex; rules past 16.
func TestBuildLeavesOutWhatAnHTTPRouteCannotEnforce(t *testing.T) {
	jwt := gatewayv2.Rule{Path: "/secret", Methods: []gatewayv2.HttpMethod{"GET"}, Jwt: &gatewayv2.JwtConfig{}}
	ext := gatewayv2.Rule{Path: "/ext", Methods: []gatewayv2.HttpMethod{"GET"}, ExtAuth: &gatewayv2.ExtAuth{ExternalAuthorizers: []string{"a"}}}
	cookie := noAuth("/c", "GET")
	cookie.Request = &gatewayv2.Request{Cookies: map[string]string{"a": "b"}}
	other := noAuth("/o", "GET")
	other.Service = &gatewayv2.Service{Name: ptr.To("pay"), Namespace: ptr.To("bank")}
	host := noAuth("/h", "GET")
	host.Request = &gatewayv2.Request{Headers: map[string]string{"Host": "bank.example.com"}}
	a := apiRule(jwt, ext, cookie, other, host, noAuth("/ok", "GET"))
	a.Spec.Timeout = ptr.To(gatewayv2.Timeout(60))
	a.Spec.CorsPolicy = &gatewayv2.CorsPolicy{AllowOrigins: gatewayv2.StringMatch{{"exact": "https://shop.example.com"}, {"regex": ".*"}}, AllowMethods: []string{"GET"},
		MaxAge: ptr.To(uint64(1) << 40)}
	route, notes := httproute.Build(a, parent, "local.kyma.dev")
	require.Len(t, route.Spec.Rules, 1)
	assert.Equal(t, "Exact /ok", path(route.Spec.Rules[0].Matches[0].Path))
	cors := route.Spec.Rules[0].Filters[0].CORS
	require.NotNil(t, cors)
	assert.Equal(t, []gatewayapiv1.CORSOrigin{"https://shop.example.com"}, cors.AllowOrigins)
	assert.EqualValues(t, 1<<31-1, cors.MaxAge, "bounded by its int32")
	assert.EqualValues(t, "60s", *route.Spec.Rules[0].Timeouts.Request, "the APIRule's timeout")
	assert.Equal(t, []string{
		"corsPolicy.allowOrigins map[regex:.*] left out: an HTTPRoute allows exact origins only",
		"rule 0 (/secret) left out: jwt is not enforced by an HTTPRoute (the Gateway answers its requests as unrouted)",
		"rule 1 (/ext) left out: extAuth is not enforced by an HTTPRoute (the Gateway answers its requests as unrouted)",
		"rule 2 (/c) left out: request.cookies cannot be set by an HTTPRoute",
		"rule 3 (/o) left out: kfn routes to Services of the APIRule's namespace only, not of bank",
		`rule 4 (/h) left out: request.headers: "Host" cannot be set`,
	}, notes)

	many := make([]gatewayv2.Rule, 17)
	for i := range many {
		many[i] = noAuth(fmt.Sprintf("/r%d", i), "GET")
	}
	route, notes = httproute.Build(apiRule(many...), parent, "")
	assert.Len(t, route.Spec.Rules, httproute.MaxRules)
	assert.Contains(t, notes, "rule 16 (/r16) left out: an HTTPRoute has at most 16 rules")
}
