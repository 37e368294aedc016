package jwtrule_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/jwtrule"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/test/jwttest"
)

var loopback = egress.Policy{AllowLoopback: true}

func rule(t *testing.T, is *jwttest.Issuer, authz ...*gatewayv2.JwtAuthorization) *jwtrule.Rule {
	t.Helper()
	r, err := jwtrule.Compile(&gatewayv2.JwtConfig{
		Authentications: []*gatewayv2.JwtAuthentication{{Issuer: is.URL(), JwksUri: is.JWKS()}},
		Authorizations:  authz,
	})
	require.NoError(t, err)
	return r
}

func bearer(token string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "http://orders.example.com/ip", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// status is Check's answer: 0 when the request goes through.
func status(d *jwtrule.Denied) int {
	if d == nil {
		return 0
	}
	return d.Status
}

// TestJWTAsKymasTests: a request without a token is 403, with one that
// is not a valid token of the issuer 401 (garbage, another issuer, a key
// the JWKS does not have, a changed payload, expired, not yet valid, alg
// none or HS256 with the public key as secret), with a valid one (RSA or
// EC) let through, its token not forwarded.
func TestJWTAsKymasTests(t *testing.T) {
	is := jwttest.NewIssuer(t)
	is.AddEC("ec-1")
	keys := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback})
	r := rule(t, is)
	ctx := context.Background()

	d := r.Check(ctx, keys, bearer(""))
	require.NotNil(t, d)
	assert.Equal(t, http.StatusForbidden, d.Status, "no token")

	req := bearer(is.Token(nil))
	assert.Nil(t, r.Check(ctx, keys, req), "a valid token")
	assert.Empty(t, req.Header.Get("Authorization"), "the token is not forwarded")
	assert.Nil(t, r.Check(ctx, keys, bearer(is.Sign("ec-1", is.Claims(time.Hour), nil))), "an EC key")

	other := jwttest.NewIssuer(t)
	stranger := jwttest.NewIssuer(t) // signs as is, with a key is does not publish
	stranger.AddRSA("rsa-2")
	valid := is.Token(nil)
	parts := strings.Split(valid, ".")
	changed := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+is.URL()+`","sub":"admin","exp":4102444800}`)) + "." + parts[2]
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("the public key used as a MAC secret")}, nil)
	require.NoError(t, err)
	mac, err := jwt.Signed(hs).Claims(is.Claims(time.Hour)).Serialize()
	require.NoError(t, err)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + "."
	tests := map[string]struct {
		token, reason string
	}{
		"garbage":         {"not-a-token", "Jwt is not in the form"},
		"another issuer":  {other.Token(nil), "Jwt issuer is not configured"},
		"an unknown key":  {stranger.Sign("rsa-2", is.Claims(time.Hour), nil), "Jwks doesn't have key to match kid or alg from Jwt"},
		"changed payload": {changed, "Jwt verification fails"},
		"expired":         {is.Sign("rsa-1", jwt.Claims{Issuer: is.URL(), Expiry: jwt.NewNumericDate(time.Now().Add(-2 * time.Minute))}, nil), "Jwt is expired"},
		"not yet valid":   {is.Sign("rsa-1", jwt.Claims{Issuer: is.URL(), NotBefore: jwt.NewNumericDate(time.Now().Add(2 * time.Minute))}, nil), "Jwt not yet valid"},
		"HS256":           {mac, "algorithm is not allowed"},
		"alg none":        {none, "algorithm is not allowed"},
		"too long":        {strings.Repeat("a", jwtrule.MaxToken+1), "longer than"},
		"at the bound":    {strings.Repeat("a", jwtrule.MaxToken), "Jwt is not in the form"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := r.Check(ctx, keys, bearer(tc.token))
			require.NotNil(t, d)
			assert.Equal(t, http.StatusUnauthorized, d.Status)
			assert.Contains(t, d.Reason, tc.reason)
		})
	}
}

// TestJWTAuthorizationsAsKymasTests: Kyma's scopes and audiences
// scenarios: an authorization's scopes and audiences must all be in the
// token, one authorization of several suffices.
func TestJWTAuthorizationsAsKymasTests(t *testing.T) {
	is := jwttest.NewIssuer(t)
	keys := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback})
	ctx := context.Background()
	scopes := func(s ...string) *gatewayv2.JwtAuthorization { return &gatewayv2.JwtAuthorization{RequiredScopes: s} }
	auds := func(a ...string) *gatewayv2.JwtAuthorization { return &gatewayv2.JwtAuthorization{Audiences: a} }
	readWrite := is.Token(map[string]any{"scope": "read write"})
	readWriteScp := is.Token(map[string]any{"scp": []string{"read", "write"}})
	claims := is.Claims(time.Hour)
	claims.Audience = jwt.Audience{"https://example.com", "https://example.com/user"}
	withAuds := is.Sign("rsa-1", claims, nil)

	tests := []struct {
		name  string
		authz []*gatewayv2.JwtAuthorization
		token string
		want  int
	}{
		{"/ip requires read and write", []*gatewayv2.JwtAuthorization{scopes("read", "write")}, readWrite, 0},
		{"as a list in scp", []*gatewayv2.JwtAuthorization{scopes("read", "write")}, readWriteScp, 0},
		{"/get requires test and write", []*gatewayv2.JwtAuthorization{scopes("test", "write")}, readWrite, http.StatusForbidden},
		{"/headers requires read", []*gatewayv2.JwtAuthorization{scopes("read")}, readWrite, 0},
		{"no scope claim", []*gatewayv2.JwtAuthorization{scopes("read")}, is.Token(nil), http.StatusForbidden},
		{"/ip requires both audiences", []*gatewayv2.JwtAuthorization{auds("https://example.com", "https://example.com/user")}, withAuds, 0},
		{"/cache: one or the other", []*gatewayv2.JwtAuthorization{auds("https://example.com"), auds("audienceNotInJWT")}, withAuds, 0},
		{"/headers requires admin too", []*gatewayv2.JwtAuthorization{auds("https://example.com", "https://example.com/admin")}, withAuds, http.StatusForbidden},
		{"no authorization: any valid token", nil, is.Token(nil), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, status(rule(t, is, tc.authz...).Check(ctx, keys, bearer(tc.token))))
		})
	}
}

// TestJWTFromHeadersAndParamsAsKymasTests: a rule that reads the token
// from a header of its own (with its prefix) or a parameter refuses one
// in the default header, takes it where it says, and does not forward it.
func TestJWTFromHeadersAndParamsAsKymasTests(t *testing.T) {
	is := jwttest.NewIssuer(t)
	keys := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback})
	ctx := context.Background()
	token := is.Token(nil)

	fromHeader, err := jwtrule.Compile(&gatewayv2.JwtConfig{Authentications: []*gatewayv2.JwtAuthentication{{
		Issuer: is.URL(), JwksUri: is.JWKS(), FromHeaders: []*gatewayv2.JwtHeader{{Name: "x-jwt-token", Prefix: "JwtToken"}},
	}}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, status(fromHeader.Check(ctx, keys, bearer(""))), "no token")
	assert.Equal(t, http.StatusForbidden, status(fromHeader.Check(ctx, keys, bearer(token))), "the default header")
	req := bearer("")
	req.Header.Set("X-Jwt-Token", "JwtToken "+token)
	assert.Nil(t, fromHeader.Check(ctx, keys, req))
	assert.Empty(t, req.Header.Get("X-Jwt-Token"), "not forwarded")

	// The Authorization header named, without a prefix: Bearer, as the
	// default.
	authHeader, err := jwtrule.Compile(&gatewayv2.JwtConfig{Authentications: []*gatewayv2.JwtAuthentication{{
		Issuer: is.URL(), JwksUri: is.JWKS(), FromHeaders: []*gatewayv2.JwtHeader{{Name: "authorization"}},
	}}})
	require.NoError(t, err)
	assert.Nil(t, authHeader.Check(ctx, keys, bearer(token)))

	fromParam, err := jwtrule.Compile(&gatewayv2.JwtConfig{Authentications: []*gatewayv2.JwtAuthentication{{
		Issuer: is.URL(), JwksUri: is.JWKS(), FromParams: []string{"jwt_token"},
	}}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, status(fromParam.Check(ctx, keys, bearer(token))), "the default header")
	req = httptest.NewRequest(http.MethodGet, "http://orders.example.com/ip?a=1&jwt_token="+token, nil)
	assert.Nil(t, fromParam.Check(ctx, keys, req))
	assert.Equal(t, "a=1", req.URL.RawQuery, "not forwarded")
}

// TestJWTRulesKfnCannotApplyAreRefused: a jwt without authentications, or
// whose issuer or jwksUri is not an http(s) URL, does not compile.
func TestJWTRulesKfnCannotApplyAreRefused(t *testing.T) {
	for name, c := range map[string]*gatewayv2.JwtConfig{
		"nothing":          nil,
		"no auth":          {},
		"issuer not a URL": {Authentications: []*gatewayv2.JwtAuthentication{{Issuer: "me", JwksUri: "https://a.example.com/jwks"}}},
		"jwks file":        {Authentications: []*gatewayv2.JwtAuthentication{{Issuer: "https://a.example.com", JwksUri: "file:///etc/passwd"}}},
		"a header no name": {Authentications: []*gatewayv2.JwtAuthentication{{Issuer: "https://a.example.com", JwksUri: "https://a.example.com/jwks", FromHeaders: []*gatewayv2.JwtHeader{{}}}}},
	} {
		_, err := jwtrule.Compile(c)
		assert.Error(t, err, name)
	}
}

// TestJWTChecksShareOneFetch: many requests with a cold cache fetch the
// key set once, and later ones use it without a fetch.
func TestJWTChecksShareOneFetch(t *testing.T) {
	is := jwttest.NewIssuer(t)
	keys := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback})
	r := rule(t, is)
	token := is.Token(nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { assert.Nil(t, r.Check(context.Background(), keys, bearer(token))) })
	}
	wg.Wait()
	assert.Nil(t, r.Check(context.Background(), keys, bearer(token)))
	assert.EqualValues(t, 1, is.Fetches.Load())
}
