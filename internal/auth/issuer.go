package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/client-go/rest"
)

// The API server's ServiceAccount issuer discovery (its OpenID provider
// configuration's jwks_uri): the public keys ServiceAccount tokens are
// signed with. RBAC's ClusterRole system:service-account-issuer-discovery
// grants it; the chart grants the event bridge the same two URLs.
const jwksPath = "/openid/v1/jwks"

// maxSignedToken bounds the bearer tokens whose signature is checked: a
// ServiceAccount token is about 1 KiB.
const maxSignedToken = 16 << 10

// keysRefresh is how often the issuer's keys are fetched again at most:
// on a token that names a key not known (the keys were rotated), and in
// Run.
const keysRefresh = 30 * time.Second

// issuerKeys knows which namespace a ServiceAccount token is of before
// any TokenReview, from the token's claims once its signature is checked
// against the cluster's ServiceAccount issuer's keys, so that reviews can
// be metered per namespace: a token signed by the cluster names its
// namespace truly, a made-up one (whatever it claims) is not attributed
// to any. It is safe for concurrent use.
type issuerKeys struct {
	client  rest.Interface // nil: no keys, every token unattributed
	timeout time.Duration

	// first is the first fetch, which every caller waits for.
	first sync.Once

	mu       sync.Mutex
	keys     *jose.JSONWebKeySet // nil until fetched
	fetched  time.Time           // the last fetch's start, answered or not
	fetching bool
}

// serviceAccountClaims are the claims of a ServiceAccount token that name
// its namespace: "kubernetes.io" of bound tokens (TokenRequest, projected
// volumes), and the one of legacy Secret-based tokens.
type serviceAccountClaims struct {
	jwt.Claims
	Kubernetes struct {
		Namespace string `json:"namespace"`
	} `json:"kubernetes.io"`
	LegacyNamespace string `json:"kubernetes.io/serviceaccount/namespace"`
}

// namespaceOf returns the namespace of a ServiceAccount token the
// cluster's issuer signed and that has not expired, or false for any
// other token (made up, a user's, another issuer's, too long, or no keys
// known). It reviews nothing: TokenReview still decides whether the token
// is accepted.
func (k *issuerKeys) namespaceOf(token string, now time.Time) (string, bool) {
	if k == nil || k.client == nil || len(token) > maxSignedToken {
		return "", false
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256})
	if err != nil || len(tok.Headers) != 1 {
		return "", false
	}
	key, ok := k.key(tok.Headers[0].KeyID, now)
	if !ok {
		return "", false
	}
	var c serviceAccountClaims
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", false
	}
	if c.Expiry == nil || c.ValidateWithLeeway(jwt.Expected{Time: now}, time.Minute) != nil {
		return "", false
	}
	ns := c.Kubernetes.Namespace
	if ns == "" {
		ns = c.LegacyNamespace
	}
	return ns, ns != ""
}

// key returns the issuer's key of that id. The keys are fetched first
// when first needed (callers wait for that one fetch), and again, in the
// background and at most every keysRefresh, when a token names a key not
// known (a rotation makes new tokens unattributed for a moment rather
// than wait).
func (k *issuerKeys) key(id string, now time.Time) (jose.JSONWebKey, bool) {
	if id == "" {
		return jose.JSONWebKey{}, false
	}
	k.first.Do(k.fetchFirst)
	k.mu.Lock()
	keys := k.keys
	stale := !k.fetching && now.Sub(k.fetched) >= keysRefresh
	k.mu.Unlock()
	if keys != nil {
		if found := keys.Key(id); len(found) > 0 {
			return found[0], true
		}
	}
	if stale {
		go k.refresh(now)
	}
	return jose.JSONWebKey{}, false
}

// refresh fetches the keys again, unless a fetch started within
// keysRefresh or runs.
func (k *issuerKeys) refresh(now time.Time) {
	if k == nil || k.client == nil {
		return
	}
	k.first.Do(k.fetchFirst)
	k.mu.Lock()
	stale := !k.fetching && now.Sub(k.fetched) >= keysRefresh
	if stale {
		k.fetching, k.fetched = true, now
	}
	k.mu.Unlock()
	if stale {
		k.fetch()
	}
}

// fetchFirst is the first fetch.
func (k *issuerKeys) fetchFirst() {
	k.mu.Lock()
	k.fetching, k.fetched = true, time.Now()
	k.mu.Unlock()
	k.fetch()
}

// fetch fetches the issuer's keys, the caller having set k.fetching; on
// failure the keys known stay.
func (k *issuerKeys) fetch() {
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	keys, err := fetchKeys(ctx, k.client)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fetching = false
	if err == nil {
		k.keys = keys
	}
}

// known says whether the issuer's keys were fetched.
func (k *issuerKeys) known() bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys != nil
}

// fetchKeys reads the issuer's key set from the API server.
func fetchKeys(ctx context.Context, client rest.Interface) (*jose.JSONWebKeySet, error) {
	b, err := client.Get().AbsPath(jwksPath).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", jwksPath, err)
	}
	var keys jose.JSONWebKeySet
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("decode %s: %w", jwksPath, err)
	}
	return &keys, nil
}
