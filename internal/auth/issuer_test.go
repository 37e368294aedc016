package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// issuer is a ServiceAccount token issuer of the test's own: its key
// signs the tokens, its public key set is what the keys' fetcher answers.
type issuer struct {
	t       *testing.T
	key     *ecdsa.PrivateKey
	kid     string
	fetches atomic.Int64
	fail    atomic.Bool
}

func newIssuer(t *testing.T, kid string) *issuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return &issuer{t: t, key: key, kid: kid}
}

func (i *issuer) fetch(context.Context) (*jose.JSONWebKeySet, error) {
	i.fetches.Add(1)
	if i.fail.Load() {
		return nil, errors.New("403 Forbidden")
	}
	return &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: i.kid, Algorithm: string(jose.ES256), Use: "sig"}}}, nil
}

// token is a token signed by key with kid, of the given claims.
func (i *issuer) token(key *ecdsa.PrivateKey, kid string, claims any) string {
	i.t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	require.NoError(i.t, err)
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	require.NoError(i.t, err)
	return tok
}

// claims are a bound ServiceAccount token's claims.
func claims(namespace string, audience []string, expiry time.Time) map[string]any {
	c := map[string]any{
		"iss": "https://kubernetes.default.svc", "sub": "system:serviceaccount:" + namespace + ":app", "aud": audience,
		"kubernetes.io": map[string]any{"namespace": namespace, "serviceaccount": map[string]any{"name": "app"}},
	}
	if !expiry.IsZero() {
		c["exp"] = expiry.Unix()
	}
	return c
}

// TestIssuerKeysAttributeOnlyTheClustersTokensForKfn: a token the
// cluster's key signed for kfn's audience, not expired, is attributed to
// its namespace; one expired, for another audience, without an expiry
// (legacy), signed by another key under the cluster's key id, unsigned or
// MAC-signed, or made of garbage is not.
func TestIssuerKeysAttributeOnlyTheClustersTokensForKfn(t *testing.T) {
	iss := newIssuer(t, "k1")
	keys := newIssuerKeys(iss.fetch, time.Second, nil)
	now := time.Now()
	hour := now.Add(time.Hour)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	good := iss.token(iss.key, "k1", claims("team-a", []string{Audience}, hour))
	payload := strings.Split(good, ".")[1]
	for name, c := range map[string]struct {
		token     string
		namespace string
	}{
		"the cluster's, for kfn":          {good, "team-a"},
		"for kfn and another audience":    {iss.token(iss.key, "k1", claims("team-a", []string{"vault", Audience}, hour)), "team-a"},
		"expired":                         {iss.token(iss.key, "k1", claims("team-a", []string{Audience}, now.Add(-2*time.Minute))), ""},
		"for another audience":            {iss.token(iss.key, "k1", claims("team-a", []string{"vault"}, hour)), ""},
		"no expiry (a legacy token)":      {iss.token(iss.key, "k1", claims("team-a", []string{Audience}, time.Time{})), ""},
		"another key, the cluster's id":   {iss.token(other, "k1", claims("victim", []string{Audience}, hour)), ""},
		"a key id the cluster has not":    {iss.token(other, "k9", claims("victim", []string{Audience}, hour)), ""},
		"no key id":                       {iss.token(iss.key, "", claims("team-a", []string{Audience}, hour)), ""},
		"alg none":                        {b64(`{"alg":"none","kid":"k1"}`) + "." + payload + ".", ""},
		"HS256 with the public key's x":   {b64(`{"alg":"HS256","kid":"k1"}`) + "." + payload + "." + b64("mac"), ""},
		"the cluster's header, no signer": {strings.Split(good, ".")[0] + "." + payload + "." + b64("not a signature"), ""},
		"garbage":                         {"not-a-jwt", ""},
		"too long":                        {good + strings.Repeat("A", maxSignedToken), ""},
	} {
		t.Run(name, func(t *testing.T) {
			ns, ok := keys.namespaceOf(t.Context(), c.token, now)
			assert.Equal(t, c.namespace, ns)
			assert.Equal(t, c.namespace != "", ok)
		})
	}
	assert.True(t, keys.known())
}

// TestIssuerKeysFollowRotationsAndFailures: a key id not known makes one
// fetch in keysRefresh, and a token of the new key is attributed once it
// is fetched; a fetch that fails (no RBAC grant) leaves the keys known
// before, and without any, every token unattributed and known false.
func TestIssuerKeysFollowRotationsAndFailures(t *testing.T) {
	iss := newIssuer(t, "k1")
	keys := newIssuerKeys(iss.fetch, time.Second, nil)
	now := time.Now()
	hour := now.Add(time.Hour)
	_, ok := keys.namespaceOf(t.Context(), iss.token(iss.key, "k1", claims("a", []string{Audience}, hour)), now)
	require.True(t, ok)
	require.Equal(t, int64(1), iss.fetches.Load(), "the first token fetches the keys")

	rotated := newIssuer(t, "k2")
	iss.key, iss.kid = rotated.key, rotated.kid
	newToken := iss.token(iss.key, "k2", claims("a", []string{Audience}, hour))
	_, ok = keys.namespaceOf(t.Context(), newToken, now)
	assert.False(t, ok, "within keysRefresh of the last fetch: not fetched again")
	assert.Equal(t, int64(1), iss.fetches.Load())
	later := now.Add(keysRefresh + time.Second)
	_, ok = keys.namespaceOf(t.Context(), newToken, later)
	assert.False(t, ok, "a key id not known: unattributed while the keys are fetched again")
	require.Eventually(t, func() bool { return iss.fetches.Load() == 2 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { _, ok := keys.namespaceOf(t.Context(), newToken, later); return ok }, 5*time.Second, time.Millisecond,
		"once fetched, the new key's tokens are attributed")

	iss.fail.Store(true)
	keys.fetch(t.Context(), false)
	assert.True(t, keys.known(), "a failed fetch keeps the keys known before")
	_, ok = keys.namespaceOf(t.Context(), newToken, later)
	assert.True(t, ok)

	failing := newIssuer(t, "k1")
	failing.fail.Store(true)
	none := newIssuerKeys(failing.fetch, time.Second, nil)
	_, ok = none.namespaceOf(t.Context(), failing.token(failing.key, "k1", claims("a", []string{Audience}, hour)), now)
	assert.False(t, ok)
	assert.False(t, none.known(), "no keys: made-up tokens are not held to the half")

	empty := newIssuerKeys(func(context.Context) (*jose.JSONWebKeySet, error) { return &jose.JSONWebKeySet{}, nil }, time.Second, nil)
	empty.fetch(t.Context(), true)
	assert.False(t, empty.known(), "an empty key set attributes nothing")
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
