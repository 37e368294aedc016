package jwttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"
)

// Issuer is an OpenID issuer for tests: keys it signs with, and its JWKS
// served over HTTP, with the fetches counted.
type Issuer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	keys   map[string]crypto.Signer // by kid
	algs   map[string]jose.SignatureAlgorithm
	served []string // the kids the JWKS has
	// Fetches counts the JWKS fetches; Down makes them answer 503; Body,
	// when set, is answered instead of the JWKS.
	Fetches atomic.Int32
	Down    atomic.Bool
	Body    atomic.Pointer[[]byte]
}

// NewIssuer starts an issuer with one RSA key, rsa-1, stopped when the
// test ends.
func NewIssuer(t *testing.T) *Issuer {
	is := &Issuer{t: t, keys: map[string]crypto.Signer{}, algs: map[string]jose.SignatureAlgorithm{}}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.Fetches.Add(1)
		if is.Down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if b := is.Body.Load(); b != nil {
			_, _ = w.Write(*b)
			return
		}
		_, _ = w.Write(is.JWKSBody())
	}))
	t.Cleanup(is.srv.Close)
	is.AddRSA("rsa-1")
	return is
}

// URL is the issuer's URL (its iss); JWKS is its key set's.
func (is *Issuer) URL() string  { return is.srv.URL }
func (is *Issuer) JWKS() string { return is.srv.URL + "/jwks" }

// JWKSBody is the issuer's key set as its JWKS serves it: the public
// keys, to serve from elsewhere (a Function, on a cluster).
func (is *Issuer) JWKSBody() []byte {
	is.mu.Lock()
	defer is.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, kid := range is.served {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: is.keys[kid].Public(), KeyID: kid, Algorithm: string(is.algs[kid]), Use: "sig"})
	}
	b, err := json.Marshal(set)
	require.NoError(is.t, err)
	return b
}

// AddRSA makes an RSA key kid and publishes it.
func (is *Issuer) AddRSA(kid string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(is.t, err)
	is.add(kid, k, jose.RS256)
}

// AddEC makes an EC P-256 key kid and publishes it.
func (is *Issuer) AddEC(kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(is.t, err)
	is.add(kid, k, jose.ES256)
}

func (is *Issuer) add(kid string, k crypto.Signer, alg jose.SignatureAlgorithm) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid], is.algs[kid] = k, alg
	is.served = append(is.served, kid)
}

// Sign signs claims (and extra claims) with key kid.
func (is *Issuer) Sign(kid string, claims jwt.Claims, extra map[string]any) string {
	is.mu.Lock()
	k, alg := is.keys[kid], is.algs[kid]
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	require.NoError(is.t, err)
	b := jwt.Signed(signer).Claims(claims)
	if extra != nil {
		b = b.Claims(extra)
	}
	raw, err := b.Serialize()
	require.NoError(is.t, err)
	return raw
}

// Token is a valid token of the issuer, signed with rsa-1, for an hour.
func (is *Issuer) Token(extra map[string]any) string {
	return is.Sign("rsa-1", is.Claims(time.Hour), extra)
}

// Claims are the issuer's claims for a subject "user", valid from now
// for valid.
func (is *Issuer) Claims(valid time.Duration) jwt.Claims {
	now := time.Now()
	return jwt.Claims{Issuer: is.URL(), Subject: "user", IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(valid))}
}
