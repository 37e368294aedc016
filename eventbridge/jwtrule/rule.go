package jwtrule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
)

// MaxToken bounds the tokens read: a longer one is refused unread.
const MaxToken = 16 << 10

// Leeway is the clock skew allowed on exp and nbf (Envoy's).
const Leeway = time.Minute

// signatureAlgorithms are the algorithms a token may be signed with:
// asymmetric only (a JWKS publishes public keys), never none nor a MAC.
var signatureAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// scopeClaims are the claims scopes are read from, as Kyma's authorization
// policies do.
var scopeClaims = []string{"scp", "scope", "scopes"}

// Rule is a rule's jwt, compiled.
type Rule struct {
	auths []authentication
	authz []authorization
}

type authentication struct {
	issuer, jwksURI string
	headers         []header // none: Authorization, Bearer
	params          []string
}

type header struct{ name, prefix string }

type authorization struct{ scopes, audiences []string }

// Compile compiles a rule's jwt. It refuses one without authentications,
// and an issuer or jwksUri that is not an absolute http(s) URL.
func Compile(c *gatewayv2.JwtConfig) (*Rule, error) {
	if c == nil || len(c.Authentications) == 0 {
		return nil, errors.New("jwt: no authentications")
	}
	r := &Rule{}
	for i, a := range c.Authentications {
		if a == nil {
			return nil, fmt.Errorf("jwt.authentications[%d]: empty", i)
		}
		if err := checkURL(a.Issuer); err != nil {
			return nil, fmt.Errorf("jwt.authentications[%d].issuer: %w", i, err)
		}
		if err := checkURL(a.JwksUri); err != nil {
			return nil, fmt.Errorf("jwt.authentications[%d].jwksUri: %w", i, err)
		}
		auth := authentication{issuer: a.Issuer, jwksURI: a.JwksUri, params: a.FromParams}
		for j, h := range a.FromHeaders {
			if h == nil || h.Name == "" {
				return nil, fmt.Errorf("jwt.authentications[%d].fromHeaders[%d]: no name", i, j)
			}
			auth.headers = append(auth.headers, header{name: http.CanonicalHeaderKey(h.Name), prefix: h.Prefix})
		}
		r.auths = append(r.auths, auth)
	}
	for _, a := range c.Authorizations {
		if a != nil {
			r.authz = append(r.authz, authorization{scopes: a.RequiredScopes, audiences: a.Audiences})
		}
	}
	return r, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("%.128q is not an http(s) URL", s)
	}
	return nil
}

// JWKSURIs returns the rule's key set URIs.
func (r *Rule) JWKSURIs() []string {
	out := make([]string, 0, len(r.auths))
	for _, a := range r.auths {
		if !slices.Contains(out, a.jwksURI) {
			out = append(out, a.jwksURI)
		}
	}
	return out
}

// Denied is Check's refusal: the status to answer and why.
type Denied struct {
	Status int
	Reason string
}

func (d *Denied) Error() string { return d.Reason }

func deny(status int, format string, args ...any) *Denied {
	return &Denied{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// Check lets req through (nil) when it carries a token one of the rule's
// authentications verifies and that grants one of its authorizations;
// else it says how to refuse it: 403 without a token or with one that
// grants too little, 401 with one that does not verify. The token is
// removed from req (its header or parameter), as Istio does not forward it.
func (r *Rule) Check(ctx context.Context, keys *KeySets, req *http.Request) *Denied {
	var seen *Denied
	for _, a := range r.auths {
		raw, remove, ok := a.token(req)
		if !ok {
			continue
		}
		claims, d := a.verify(ctx, keys, raw)
		if d != nil {
			if d.Status == 0 { // another issuer's: another authentication may take it
				seen = &Denied{Status: http.StatusUnauthorized, Reason: d.Reason}
				continue
			}
			return d
		}
		remove()
		return r.authorize(claims)
	}
	if seen != nil {
		return seen
	}
	return deny(http.StatusForbidden, "RBAC: access denied: no token")
}

// token reads the token from where a says, and returns a func that takes
// it off the request.
func (a *authentication) token(req *http.Request) (string, func(), bool) {
	headers := a.headers
	if len(headers) == 0 && len(a.params) == 0 {
		headers = []header{{name: "Authorization", prefix: "Bearer "}}
	}
	for _, h := range headers {
		v := req.Header.Get(h.name)
		if v == "" {
			continue
		}
		prefix := h.prefix
		if prefix == "" && h.name == "Authorization" {
			prefix = "Bearer "
		}
		if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
			continue
		}
		name := h.name
		return strings.TrimSpace(v[len(prefix):]), func() { req.Header.Del(name) }, true
	}
	q := req.URL.Query()
	for _, p := range a.params {
		if v := q.Get(p); v != "" {
			name := p
			return v, func() {
				q.Del(name)
				req.URL.RawQuery = q.Encode()
			}, true
		}
	}
	return "", nil, false
}

// claims are what authorize reads of a verified token.
type claims struct {
	jwt.Claims
	extra map[string]any
}

// verify checks raw's signature against a's issuer's keys, and its
// issuer, expiry and not-before. A token of another issuer is a Denied
// with Status 0.
func (a *authentication) verify(ctx context.Context, keys *KeySets, raw string) (*claims, *Denied) {
	if len(raw) > MaxToken {
		return nil, deny(http.StatusUnauthorized, "Jwt is longer than %d bytes", MaxToken)
	}
	tok, err := jwt.ParseSigned(raw, signatureAlgorithms)
	if err != nil {
		return nil, deny(http.StatusUnauthorized, "Jwt is not in the form of Header.Payload.Signature, or its algorithm is not allowed")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, deny(http.StatusUnauthorized, "Jwt payload is not valid")
	}
	if unverified.Issuer != a.issuer {
		return nil, &Denied{Reason: "Jwt issuer is not configured"}
	}
	candidates, err := keys.Keys(ctx, a.jwksURI, tok.Headers[0].KeyID)
	if err != nil {
		return nil, deny(http.StatusUnauthorized, "Jwks remote fetch failed: %v", err)
	}
	c := &claims{}
	verified := false
	for _, key := range candidates {
		if key.Algorithm != "" && key.Algorithm != tok.Headers[0].Algorithm {
			continue
		}
		c.extra = nil
		if tok.Claims(key.Key, &c.Claims, &c.extra) == nil {
			verified = true
			break
		}
	}
	if !verified {
		if len(candidates) == 0 {
			return nil, deny(http.StatusUnauthorized, "Jwks doesn't have key to match kid or alg from Jwt")
		}
		return nil, deny(http.StatusUnauthorized, "Jwt verification fails")
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: a.issuer, Time: keys.now()}, Leeway); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return nil, deny(http.StatusUnauthorized, "Jwt is expired")
		case errors.Is(err, jwt.ErrNotValidYet):
			return nil, deny(http.StatusUnauthorized, "Jwt not yet valid")
		}
		return nil, deny(http.StatusUnauthorized, "Jwt verification fails: %v", err)
	}
	return c, nil
}

// authorize lets a verified token through when it grants one of the
// rule's authorizations (any token when it has none).
func (r *Rule) authorize(c *claims) *Denied {
	if len(r.authz) == 0 {
		return nil
	}
	for _, a := range r.authz {
		if hasAll(c.Audience, a.audiences) && hasScopes(c.extra, a.scopes) {
			return nil
		}
	}
	return deny(http.StatusForbidden, "RBAC: access denied: the token grants none of the rule's authorizations")
}

func hasAll(aud jwt.Audience, want []string) bool {
	for _, w := range want {
		if !aud.Contains(w) {
			return false
		}
	}
	return true
}

// hasScopes reports whether one of the scope claims has every scope of
// want: a string of scopes separated by spaces, or a list of strings.
func hasScopes(extra map[string]any, want []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, name := range scopeClaims {
		var have []string
		switch v := extra[name].(type) {
		case string:
			have = strings.Fields(v)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					have = append(have, s)
				}
			}
		default:
			continue
		}
		all := true
		for _, w := range want {
			if !slices.Contains(have, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
