package gateway

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
)

// CORS as Kyma's APIRule v2 has it (Istio's corsPolicy, Envoy's CORS
// filter): an APIRule without corsPolicy answers with no CORS header at
// all, the Function's own removed; one with a corsPolicy answers a
// preflight (OPTIONS with Origin and Access-Control-Request-Method) for a
// path and method one of its rules serves itself, 200, with the policy's
// headers when the Origin is allowed and none when it is not, and adds to
// the answers of allowed origins Access-Control-Allow-Origin (the origin),
// -Allow-Credentials and -Expose-Headers, in place of the Function's.

// maxOriginPattern bounds an allowOrigins value (a regex is compiled).
const maxOriginPattern = 1024

// corsPolicy is an APIRule's corsPolicy, compiled.
type corsPolicy struct {
	origins []originMatch
	// The headers' values, "" when the policy sets none.
	allowMethods, allowHeaders, exposeHeaders, maxAge string
	credentials                                       bool
}

// originMatch is one allowOrigins entry: exact, prefix or regex (RE2,
// matching the whole origin).
type originMatch struct {
	exact, prefix string
	re            *regexp.Regexp
}

// compileCORS compiles p; nil for none. It refuses what Istio would not
// take: an entry that is not one of exact, prefix or regex, a regex that
// does not compile, values that cannot be header values.
func compileCORS(p *gatewayv2.CorsPolicy) (*corsPolicy, error) {
	if p == nil {
		return nil, nil
	}
	c := &corsPolicy{credentials: p.AllowCredentials != nil && *p.AllowCredentials}
	for i, m := range p.AllowOrigins {
		if len(m) != 1 {
			return nil, fmt.Errorf("corsPolicy.allowOrigins[%d]: one of exact, prefix or regex", i)
		}
		for kind, v := range m {
			if len(v) > maxOriginPattern {
				return nil, fmt.Errorf("corsPolicy.allowOrigins[%d]: longer than %d bytes", i, maxOriginPattern)
			}
			switch kind {
			case "exact":
				c.origins = append(c.origins, originMatch{exact: v})
			case "prefix":
				c.origins = append(c.origins, originMatch{prefix: v})
			case "regex":
				re, err := regexp.Compile(`^(?:` + v + `)$`)
				if err != nil {
					return nil, fmt.Errorf("corsPolicy.allowOrigins[%d]: %w", i, err)
				}
				c.origins = append(c.origins, originMatch{re: re})
			default:
				return nil, fmt.Errorf("corsPolicy.allowOrigins[%d]: %.32q is not exact, prefix or regex", i, kind)
			}
		}
	}
	var err error
	if c.allowMethods, err = headerList("allowMethods", p.AllowMethods); err != nil {
		return nil, err
	}
	if c.allowHeaders, err = headerList("allowHeaders", p.AllowHeaders); err != nil {
		return nil, err
	}
	if c.exposeHeaders, err = headerList("exposeHeaders", p.ExposeHeaders); err != nil {
		return nil, err
	}
	if p.MaxAge != nil {
		c.maxAge = strconv.FormatUint(*p.MaxAge, 10)
	}
	return c, nil
}

// headerList joins a policy's list into one header value, as Envoy does
// (",", no space), refusing entries that cannot be in one.
func headerList(field string, values []string) (string, error) {
	for i, v := range values {
		if v == "" || len(v) > 256 || strings.Contains(v, ",") || !httpguts.ValidHeaderFieldValue(v) {
			return "", fmt.Errorf("corsPolicy.%s[%d]: %.64q cannot be in a header", field, i, v)
		}
	}
	return strings.Join(values, ","), nil
}

// allows reports whether the policy allows origin.
func (c *corsPolicy) allows(origin string) bool {
	for _, m := range c.origins {
		switch {
		case m.re != nil:
			if m.re.MatchString(origin) {
				return true
			}
		case m.prefix != "":
			if strings.HasPrefix(origin, m.prefix) {
				return true
			}
		case m.exact == origin:
			return true
		}
	}
	return false
}

// isPreflight reports whether r is a CORS preflight request.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// preflight answers a preflight request for a path and method the
// APIRule serves: 200, with the policy's headers when origin is allowed.
func (c *corsPolicy) preflight(w http.ResponseWriter, origin string) {
	h := w.Header()
	h.Add("Vary", "Origin")
	if c.allows(origin) {
		h.Set("Access-Control-Allow-Origin", origin)
		setIf(h, "Access-Control-Allow-Methods", c.allowMethods)
		setIf(h, "Access-Control-Allow-Headers", c.allowHeaders)
		setIf(h, "Access-Control-Expose-Headers", c.exposeHeaders)
		setIf(h, "Access-Control-Max-Age", c.maxAge)
		if c.credentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
	}
	w.WriteHeader(http.StatusOK)
}

// answer sets the CORS headers of an answer to a request from origin ("":
// none) under policy c (nil: none), in place of the Function's own.
func answerCORS(c *corsPolicy, h http.Header, origin string) {
	for name := range h {
		if strings.HasPrefix(name, "Access-Control-") {
			delete(h, name)
		}
	}
	if c == nil || origin == "" {
		return
	}
	h.Add("Vary", "Origin")
	if !c.allows(origin) {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	setIf(h, "Access-Control-Expose-Headers", c.exposeHeaders)
	if c.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

func setIf(h http.Header, name, value string) {
	if value != "" {
		h.Set(name, value)
	}
}

// corsKey carries an exposed request's CORS answer to the proxy's
// ModifyResponse.
type corsKey struct{}

// corsAnswer is what an exposed request's answer gets: its APIRule's
// policy (nil: none) and the request's Origin.
type corsAnswer struct {
	policy *corsPolicy
	origin string
}

// failed answers r with the gateway's own error: with its APIRule's CORS
// headers when r came through one (Exposed), so that a page of an allowed
// origin reads a 404, 502, 503 or 504 of the gateway's as it reads the
// Function's answers.
func failed(w http.ResponseWriter, r *http.Request, msg string, code int) {
	if a, ok := r.Context().Value(corsKey{}).(*corsAnswer); ok {
		answerCORS(a.policy, w.Header(), a.origin)
	}
	http.Error(w, msg, code)
}
