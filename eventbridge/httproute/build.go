package httproute

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
)

// Labels on the routes kfn writes: ManagedBy (ManagedByValue) finds them,
// APIRuleLabel names their APIRule.
const (
	ManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByValue = "kfn"
	APIRuleLabel   = "kfn.dev/apirule"
)

// MaxRules is the most rules an HTTPRoute has (Gateway API's bound).
const MaxRules = 16

// Parent is the Gateway the routes attach to.
type Parent struct {
	Namespace, Name string
	// SectionName is the Gateway's listener, "" for all.
	SectionName string
}

// Build returns the HTTPRoute of a for parent, with the short hosts in
// domain, and notes of what it leaves out or serves otherwise than the
// APIRule says. The route has the APIRule's name and namespace, is owned
// by it, and carries the labels above.
func Build(a *gatewayv2.APIRule, parent Parent, domain string) (*gatewayapiv1.HTTPRoute, []string) {
	var notes []string
	ref := gatewayapiv1.ParentReference{Namespace: ptr.To(gatewayapiv1.Namespace(parent.Namespace)), Name: gatewayapiv1.ObjectName(parent.Name)}
	if parent.SectionName != "" {
		ref.SectionName = ptr.To(gatewayapiv1.SectionName(parent.SectionName))
	}
	route := &gatewayapiv1.HTTPRoute{
		TypeMeta: metav1.TypeMeta{APIVersion: gatewayapiv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name,
			Labels: map[string]string{ManagedBy: ManagedByValue, APIRuleLabel: a.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gatewayv2.GroupVersion.String(), Kind: "APIRule", Name: a.Name, UID: a.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: gatewayapiv1.HTTPRouteSpec{CommonRouteSpec: gatewayapiv1.CommonRouteSpec{ParentRefs: []gatewayapiv1.ParentReference{ref}}},
	}
	for _, h := range a.Spec.Hosts {
		if h == nil {
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(string(*h), "."))
		if !strings.Contains(name, ".") && domain != "" {
			name += "." + domain
		}
		route.Spec.Hostnames = append(route.Spec.Hostnames, gatewayapiv1.Hostname(name))
	}
	cors, corsNotes := corsFilter(a.Spec.CorsPolicy)
	notes = append(notes, corsNotes...)
	for i, r := range a.Spec.Rules {
		rule, why := buildRule(a, r, cors)
		if why != "" {
			notes = append(notes, fmt.Sprintf("rule %d (%s) left out: %s", i, r.Path, why))
			continue
		}
		if len(route.Spec.Rules) == MaxRules {
			notes = append(notes, fmt.Sprintf("rule %d (%s) left out: an HTTPRoute has at most %d rules", i, r.Path, MaxRules))
			continue
		}
		route.Spec.Rules = append(route.Spec.Rules, rule)
	}
	if len(route.Spec.Rules) > 1 {
		notes = append(notes, "the Gateway orders the rules' matches by how specific they are (Gateway API), not as listed")
	}
	return route, notes
}

// buildRule is rule r of a as an HTTPRoute rule, or why it is left out.
func buildRule(a *gatewayv2.APIRule, r gatewayv2.Rule, cors *gatewayapiv1.HTTPCORSFilter) (gatewayapiv1.HTTPRouteRule, string) {
	var out gatewayapiv1.HTTPRouteRule
	switch {
	case r.Jwt != nil:
		return out, "jwt is not enforced by an HTTPRoute (the Gateway answers its requests as unrouted)"
	case r.ExtAuth != nil:
		return out, "extAuth is not enforced by an HTTPRoute (the Gateway answers its requests as unrouted)"
	}
	svc := r.Service
	if svc == nil {
		svc = a.Spec.Service
	}
	switch {
	case svc == nil || svc.Name == nil:
		return out, "no service"
	case svc.IsExternal != nil && *svc.IsExternal:
		return out, "kfn routes to Services of the cluster only (service.external)"
	case svc.Namespace != nil && *svc.Namespace != "" && *svc.Namespace != a.Namespace:
		return out, fmt.Sprintf("kfn routes to Services of the APIRule's namespace only, not of %s", *svc.Namespace)
	}
	port := gatewayapiv1.PortNumber(80)
	if svc.Port != nil {
		port = gatewayapiv1.PortNumber(*svc.Port)
	}
	path, ok := pathMatch(r.Path)
	if !ok {
		return out, "invalid path"
	}
	for _, m := range r.Methods {
		out.Matches = append(out.Matches, gatewayapiv1.HTTPRouteMatch{Path: path, Method: ptr.To(gatewayapiv1.HTTPMethod(m))})
	}
	if r.Request != nil {
		headers, cookies, refused := gateway.RequestChanges(r.Request)
		switch {
		case refused != "":
			return out, refused
		case len(cookies) > 0:
			return out, "request.cookies cannot be set by an HTTPRoute"
		}
		if len(headers) > 0 {
			f := &gatewayapiv1.HTTPHeaderFilter{}
			for _, name := range slices.Sorted(maps.Keys(headers)) {
				f.Set = append(f.Set, gatewayapiv1.HTTPHeader{Name: gatewayapiv1.HTTPHeaderName(name), Value: headers[name]})
			}
			out.Filters = append(out.Filters, gatewayapiv1.HTTPRouteFilter{Type: gatewayapiv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: f})
		}
	}
	if cors != nil {
		out.Filters = append(out.Filters, gatewayapiv1.HTTPRouteFilter{Type: gatewayapiv1.HTTPRouteFilterCORS, CORS: cors.DeepCopy()})
	}
	timeout := gateway.DefaultAPIRuleTimeout
	if t := a.Spec.Timeout; t != nil {
		timeout = time.Duration(*t) * time.Second
	}
	if t := r.Timeout; t != nil {
		timeout = time.Duration(*t) * time.Second
	}
	out.Timeouts = &gatewayapiv1.HTTPRouteTimeouts{Request: ptr.To(gatewayapiv1.Duration(fmt.Sprintf("%ds", int(timeout.Seconds()))))}
	out.BackendRefs = []gatewayapiv1.HTTPBackendRef{{BackendRef: gatewayapiv1.BackendRef{BackendObjectReference: gatewayapiv1.BackendObjectReference{
		Name: gatewayapiv1.ObjectName(*svc.Name), Port: ptr.To(port)}}}}
	return out, ""
}

// pathMatch is a rule path as an HTTPRoute path match: "/*" and "/{**}"
// every path (a prefix of "/"), a path without operators itself, and the
// others a regular expression ({*} one segment, {**} any). It reports
// false for a path APIRule v2 does not allow.
func pathMatch(p string) (*gatewayapiv1.HTTPPathMatch, bool) {
	if p == "/*" || p == "/{**}" {
		return &gatewayapiv1.HTTPPathMatch{Type: ptr.To(gatewayapiv1.PathMatchPathPrefix), Value: ptr.To("/")}, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	if !strings.Contains(p, "{") {
		return &gatewayapiv1.HTTPPathMatch{Type: ptr.To(gatewayapiv1.PathMatchExact), Value: ptr.To(p)}, true
	}
	var re strings.Builder
	for _, seg := range strings.Split(p[1:], "/") {
		re.WriteString("/")
		switch seg {
		case "{*}":
			re.WriteString("[^/]+")
		case "{**}":
			re.WriteString(".*")
		default:
			if strings.ContainsAny(seg, "{}") {
				return nil, false
			}
			re.WriteString(regexp.QuoteMeta(seg))
		}
	}
	return &gatewayapiv1.HTTPPathMatch{Type: ptr.To(gatewayapiv1.PathMatchRegularExpression), Value: ptr.To(re.String())}, true
}

// corsFilter is a corsPolicy as an HTTPRoute CORS filter, and notes of
// what it cannot say (origins by prefix or regex, which it leaves out).
func corsFilter(p *gatewayv2.CorsPolicy) (*gatewayapiv1.HTTPCORSFilter, []string) {
	if p == nil {
		return nil, nil
	}
	var notes []string
	f := &gatewayapiv1.HTTPCORSFilter{AllowCredentials: p.AllowCredentials}
	for _, m := range p.AllowOrigins {
		if v, ok := m["exact"]; ok && len(m) == 1 {
			f.AllowOrigins = append(f.AllowOrigins, gatewayapiv1.CORSOrigin(v))
			continue
		}
		notes = append(notes, fmt.Sprintf("corsPolicy.allowOrigins %v left out: an HTTPRoute allows exact origins only", m))
	}
	for _, m := range p.AllowMethods {
		f.AllowMethods = append(f.AllowMethods, gatewayapiv1.HTTPMethodWithWildcard(m))
	}
	for _, h := range p.AllowHeaders {
		f.AllowHeaders = append(f.AllowHeaders, gatewayapiv1.HTTPHeaderName(h))
	}
	for _, h := range p.ExposeHeaders {
		f.ExposeHeaders = append(f.ExposeHeaders, gatewayapiv1.HTTPHeaderName(h))
	}
	if p.MaxAge != nil {
		f.MaxAge = int32(min(*p.MaxAge, 1<<31-1))
	}
	return f, notes
}
