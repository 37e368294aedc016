package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/types"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/apiroute"
	"github.com/kfn-dev/kfn/eventbridge/extauth"
	"github.com/kfn-dev/kfn/eventbridge/jwtrule"
)

// DefaultAPIRuleTimeout is how long a request of an APIRule's rule may
// take when neither the rule nor the APIRule sets a timeout (Kyma's).
const DefaultAPIRuleTimeout = 180 * time.Second

// exposure is what a rule of an APIRule does with the requests it serves.
type exposure struct {
	fn types.NamespacedName
	// port is the rule's Service port: a Function's Service serves 80
	// (FunctionPort); another Service of the namespace, any of its own
	// (Services).
	port    int32
	timeout time.Duration
	headers map[string]string
	cookies []*http.Cookie
	// cors is the APIRule's corsPolicy, nil for none.
	cors *corsPolicy
	// jwt is the rule's jwt access strategy (or its extAuth's
	// restrictions), nil for none; ext are its extAuth's authorizers.
	jwt *jwtrule.Rule
	ext []string
	// access names the rule's access strategy: noAuth, jwt or extAuth.
	access string
	// refused says why kfn does not serve the rule as written: its
	// requests are answered 403 with it (failing closed).
	refused string
}

// APIRuleStatus is what the gateway makes of an APIRule: Ready (served as
// written), Warning (served, some rules refusing every request, which
// Description names) or Error (not served: Description says why).
type APIRuleStatus struct {
	State       gatewayv2.State
	Description string
}

// SetAPIRules makes the gateway serve rules (Exposed), instead of the
// APIRules it served, and returns the status of each, by namespace/name.
// A host belongs to the oldest APIRule that has it; a namespace's rules
// and hosts are bounded (package apiroute); a rule exposes a Service of
// its APIRule's namespace only: a Function's on port 80 (FunctionPort),
// any other port or Service through Services; hosts that name a cluster
// Service (Config.HostSuffixes) or cover every short host of
// Config.APIRuleDomain are refused.
func (g *Gateway) SetAPIRules(rules []*gatewayv2.APIRule) map[types.NamespacedName]APIRuleStatus {
	out := make(map[types.NamespacedName]APIRuleStatus, len(rules))
	in := make([]apiroute.APIRule[exposure], 0, len(rules))
	warnings := map[apiroute.Key][]string{}
	for _, r := range rules {
		key := apiroute.Key{Namespace: r.Namespace, Name: r.Name}
		a, notes, err := compile(r, g.extAuth)
		if err != nil {
			out[types.NamespacedName(key)] = APIRuleStatus{State: gatewayv2.StateError, Description: err.Error()}
			continue
		}
		in = append(in, a)
		warnings[key] = notes
	}
	boundJWKS(in, warnings)
	table, refused := apiroute.Build(in, apiroute.Options{DefaultDomain: g.cfg.APIRuleDomain, Reserved: g.cfg.HostSuffixes})
	for key, err := range refused {
		switch {
		case err != nil:
			out[types.NamespacedName(key)] = APIRuleStatus{State: gatewayv2.StateError, Description: err.Error()}
		case len(warnings[key]) > 0:
			out[types.NamespacedName(key)] = APIRuleStatus{State: gatewayv2.StateWarning, Description: strings.Join(warnings[key], "; ")}
		default:
			out[types.NamespacedName(key)] = APIRuleStatus{State: gatewayv2.StateReady}
		}
	}
	g.apiRules.Store(table)
	return out
}

// MaxJWKSPerNamespace bounds the JWKS URIs the jwt rules of one
// namespace's APIRules name: each is a key set the gateway fetches and
// keeps for them.
const MaxJWKSPerNamespace = 8

// boundJWKS refuses the jwt rules that would take their namespace past
// MaxJWKSPerNamespace key sets, and adds the warning: the rules of the
// oldest APIRules keep theirs, whatever order in has.
func boundJWKS(in []apiroute.APIRule[exposure], warnings map[apiroute.Key][]string) {
	order := make([]int, len(in))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := in[order[i]], in[order[j]]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Key.String() < b.Key.String()
	})
	seen := map[string]map[string]bool{}
	for _, k := range order {
		a := in[k]
		uris := seen[a.Namespace]
		if uris == nil {
			uris = map[string]bool{}
			seen[a.Namespace] = uris
		}
		for i := range a.Rules {
			e := &a.Rules[i].Target
			if e.jwt == nil || e.refused != "" {
				continue
			}
			var added []string
			for _, u := range e.jwt.JWKSURIs() {
				if !uris[u] {
					added = append(added, u)
				}
			}
			if len(uris)+len(added) > MaxJWKSPerNamespace {
				e.refused = fmt.Sprintf("the namespace's jwt rules name more than %d jwksUris", MaxJWKSPerNamespace)
				warnings[a.Key] = append(warnings[a.Key], fmt.Sprintf("rule %d (%s) refuses every request: %s", i, a.Rules[i].Path, e.refused))
				continue
			}
			for _, u := range added {
				uris[u] = true
			}
		}
	}
}

// compile turns r into apiroute's form, each rule with what it does, and
// the warnings of the rules it serves otherwise than written; an error
// when r cannot be served at all (its corsPolicy).
func compile(r *gatewayv2.APIRule, authorizers *extauth.Checker) (apiroute.APIRule[exposure], []string, error) {
	a := apiroute.APIRule[exposure]{Key: apiroute.Key{Namespace: r.Namespace, Name: r.Name}, Created: r.CreationTimestamp.Time,
		Served: r.Status.State == gatewayv2.StateReady || r.Status.State == gatewayv2.StateWarning}
	for _, h := range r.Spec.Hosts {
		if h != nil {
			a.Hosts = append(a.Hosts, string(*h))
		}
	}
	cors, err := compileCORS(r.Spec.CorsPolicy)
	if err != nil {
		return a, nil, err
	}
	var warnings []string
	for i, rule := range r.Spec.Rules {
		e := exposureOf(r, rule, authorizers)
		e.cors = cors
		if e.refused != "" {
			warnings = append(warnings, fmt.Sprintf("rule %d (%s) refuses every request: %s", i, rule.Path, e.refused))
		}
		methods := make([]string, len(rule.Methods))
		for j, m := range rule.Methods {
			methods[j] = string(m)
		}
		a.Rules = append(a.Rules, apiroute.Rule[exposure]{Path: rule.Path, Methods: methods, Target: e})
	}
	return a, warnings, nil
}

// exposureOf is what rule of r does with a request; authorizers are
// those extAuth may name.
func exposureOf(r *gatewayv2.APIRule, rule gatewayv2.Rule, authorizers *extauth.Checker) exposure {
	svc := rule.Service
	if svc == nil {
		svc = r.Spec.Service
	}
	e := exposure{access: "noAuth"}
	switch {
	case rule.Jwt != nil:
		e.access = "jwt"
	case rule.ExtAuth != nil:
		e.access = "extAuth"
	}
	switch {
	case svc == nil || svc.Name == nil:
		e.refused = "no service"
	case svc.IsExternal != nil && *svc.IsExternal:
		e.refused = "kfn exposes Services of the cluster only (service.external)"
	case svc.Port != nil && (*svc.Port == 0 || *svc.Port > 65535):
		e.refused = fmt.Sprintf("port %d is no port", *svc.Port)
	case svc.Namespace != nil && *svc.Namespace != "" && *svc.Namespace != r.Namespace:
		e.refused = fmt.Sprintf("kfn exposes Services of the APIRule's namespace only, not of %s", *svc.Namespace)
	case rule.Jwt != nil:
		jwt, err := jwtrule.Compile(rule.Jwt)
		if err != nil {
			e.refused = err.Error()
		}
		e.jwt = jwt
	case rule.ExtAuth != nil:
		if n := authorizers.Unknown(rule.ExtAuth.ExternalAuthorizers); n != "" {
			e.refused = fmt.Sprintf("extAuth: authorizer %.64q is not defined (the chart's eventbridge.gateway.authorizers)", n)
			break
		}
		e.ext = rule.ExtAuth.ExternalAuthorizers
		if rule.ExtAuth.Restrictions != nil {
			jwt, err := jwtrule.Compile(rule.ExtAuth.Restrictions)
			if err != nil {
				e.refused = "extAuth.restrictions: " + err.Error()
			}
			e.jwt = jwt
		}
	}
	if svc != nil && svc.Name != nil {
		e.fn = types.NamespacedName{Namespace: r.Namespace, Name: *svc.Name}
	}
	e.port = FunctionPort
	if svc != nil && svc.Port != nil {
		e.port = int32(*svc.Port)
	}
	e.timeout = DefaultAPIRuleTimeout
	if t := r.Spec.Timeout; t != nil {
		e.timeout = time.Duration(*t) * time.Second
	}
	if t := rule.Timeout; t != nil {
		e.timeout = time.Duration(*t) * time.Second
	}
	if rule.Request != nil && e.refused == "" {
		e.headers, e.cookies, e.refused = RequestChanges(rule.Request)
	}
	return e
}

// ExposedRoute is one rule of an APIRule the gateway serves.
type ExposedRoute struct {
	// APIRule names the APIRule; Index is the rule's index in its rules.
	APIRule types.NamespacedName
	Index   int
	// Hosts are the APIRule's hosts, a short one in its domain.
	Hosts []string
	// Path is the rule's path pattern, Methods the methods it serves.
	Path    string
	Methods []string
	// Service is the Service the rule reaches, Port the port of it (a
	// Function's: 80).
	Service types.NamespacedName
	Port    int32
	// Access is the rule's access strategy: noAuth, jwt or extAuth.
	Access string
	// Refused says why the rule refuses every request, "" when it serves.
	Refused string
}

// Routes returns the rules of the APIRules the gateway serves (the
// last SetAPIRules'), by APIRule namespace and name, each APIRule's in
// order.
func (g *Gateway) Routes() []ExposedRoute {
	var out []ExposedRoute
	for _, k := range g.apiRules.Load().Kept() {
		for _, r := range k.Routes {
			e := r.Target
			out = append(out, ExposedRoute{APIRule: types.NamespacedName(k.Key), Index: r.Index, Hosts: k.Hosts,
				Path: r.Path.String(), Methods: r.Methods(), Service: e.fn, Port: e.port, Access: e.access, Refused: e.refused})
		}
	}
	return out
}

// reservedHeaders are the headers an APIRule may not set: the ones HTTP
// itself and the gateway's proxying own.
var reservedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true, "Cookie": true,
	"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true, "Forwarded": true}

// RequestChanges checks a rule's request changes: the headers, the
// cookies, or why they cannot be made.
func RequestChanges(req *gatewayv2.Request) (map[string]string, []*http.Cookie, string) {
	headers := make(map[string]string, len(req.Headers))
	for name, value := range req.Headers {
		canonical := http.CanonicalHeaderKey(name)
		if !validHeader(name, value) || reservedHeaders[canonical] || strings.HasPrefix(canonical, "X-Kfn-") {
			return nil, nil, fmt.Sprintf("request.headers: %.64q cannot be set", name)
		}
		headers[canonical] = value
	}
	names := make([]string, 0, len(req.Cookies))
	for name := range req.Cookies {
		names = append(names, name)
	}
	sort.Strings(names)
	cookies := make([]*http.Cookie, 0, len(names))
	for _, name := range names {
		c := &http.Cookie{Name: name, Value: req.Cookies[name]}
		if err := c.Valid(); err != nil {
			return nil, nil, fmt.Sprintf("request.cookies: %.64q: %v", name, err)
		}
		cookies = append(cookies, c)
	}
	return headers, cookies, ""
}

// validHeader reports whether name and value make a well-formed header
// of a bounded size.
func validHeader(name, value string) bool {
	return len(name) <= 256 && len(value) <= 4096 && httpguts.ValidHeaderFieldName(name) && httpguts.ValidHeaderFieldValue(value)
}

// Exposed returns a handler that serves the requests whose Host an APIRule
// of SetAPIRules has, by its rules (404 when none serves the path and
// method, 403 when the rule refuses, else the rule's Function, or the
// port of another Service, with its timeout and request changes, whoever
// calls: the rule's access strategy decides, not Kubernetes RBAC), and
// hands every other request to next.
// The APIRule's corsPolicy answers preflights and sets the answers' CORS
// headers (cors.go).
func (g *Gateway) Exposed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		table := g.apiRules.Load()
		if table == nil {
			next.ServeHTTP(w, r)
			return
		}
		res := table.Match(r.Host, r.URL.EscapedPath(), r.Method)
		if res.Outcome == apiroute.NoHost {
			next.ServeHTTP(w, r)
			return
		}
		origin := r.Header.Get("Origin")
		if isPreflight(r) {
			// The preflight of a path and method a rule serves, for an
			// APIRule with a corsPolicy, is the gateway's to answer.
			pre := table.Match(r.Host, r.URL.EscapedPath(), r.Header.Get("Access-Control-Request-Method"))
			if pre.Outcome == apiroute.Matched && pre.Route.Target.cors != nil {
				pre.Route.Target.cors.preflight(w, origin)
				return
			}
		}
		switch res.Outcome {
		case apiroute.Matched:
		default:
			http.Error(w, fmt.Sprintf("no rule of APIRule %s serves %s %.256s (%s)", res.APIRule, r.Method, r.URL.EscapedPath(), res.Outcome), http.StatusNotFound)
			return
		}
		e := res.Route.Target
		// A refusal carries the APIRule's CORS headers, so that a page of
		// an allowed origin reads why (a forwarded answer gets them from
		// the proxy, in place of the Function's).
		if e.refused != "" {
			answerCORS(e.cors, w.Header(), origin)
			http.Error(w, fmt.Sprintf("rule %d of APIRule %s refuses every request: %s", res.Route.Index, res.APIRule, e.refused), http.StatusForbidden)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), e.timeout)
		defer cancel()
		out := r.Clone(ctx)
		if len(e.ext) > 0 {
			// Before the jwt restrictions, which take the token off.
			if d := g.extAuth.Check(ctx, res.APIRule.Namespace, e.ext, out); d != nil {
				answerCORS(e.cors, d.Header, origin)
				d.Write(w)
				return
			}
		}
		if e.jwt != nil {
			if d := e.jwt.Check(ctx, g.jwks, out); d != nil {
				answerCORS(e.cors, w.Header(), origin)
				if d.Status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				}
				http.Error(w, d.Reason, d.Status)
				return
			}
		}
		out = out.WithContext(context.WithValue(ctx, corsKey{}, &corsAnswer{policy: e.cors, origin: origin}))
		for name, value := range e.headers {
			out.Header.Set(name, value)
		}
		for _, c := range e.cookies {
			out.AddCookie(c)
		}
		path := forwardPath{path: r.URL.Path, escaped: r.URL.EscapedPath()}
		if e.port == FunctionPort && g.backends.Known(e.fn.Namespace, e.fn.Name) {
			g.forward(w, out, e.fn, path)
			return
		}
		g.forwardService(w, out, e.fn, e.port, path)
	})
}

// FunctionPort is the port of a Function's Service, the one an APIRule
// names to reach the Function through the gateway (its holds and wakes).
const FunctionPort = 80

// forwardService proxies r to path of port of Service svc, which is not
// a Function's (or not its port 80): at one of its ready endpoints, at
// once (no hold: kfn does not wake it), when the backends reach Services;
// else 404 as a Function unknown.
func (g *Gateway) forwardService(w http.ResponseWriter, r *http.Request, svc types.NamespacedName, port int32, path forwardPath) {
	services, ok := g.backends.(Services)
	if !ok {
		failed(w, r, fmt.Sprintf("no function %s", svc), http.StatusNotFound)
		return
	}
	addr, err := services.ServiceAddr(r.Context(), svc.Namespace, svc.Name, port)
	if err != nil {
		msg := fmt.Sprintf("service %s port %d: %v", svc, port, err)
		if errors.Is(err, ErrNoService) {
			failed(w, r, msg, http.StatusNotFound)
		} else {
			g.unavailable(w, r, msg)
		}
		return
	}
	g.proxyTo(w, r, svc.Namespace, addr, path)
}
