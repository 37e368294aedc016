package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/client-go/rest"
)

// The API server's ServiceAccount issuer discovery (its OpenID provider
// configuration's jwks_uri): the public keys ServiceAccount tokens are
// signed with. RBAC's ClusterRole system:service-account-issuer-discovery
// grants it; the chart grants the event bridge the same URL.
const jwksPath = "/openid/v1/jwks"

// maxSignedToken bounds the bearer tokens whose signature is checked: a
// ServiceAccount token is about 1 KiB.
const maxSignedToken = 16 << 10

// keysRefresh is how often the issuer's keys are fetched again: by Run,
// and at most that often on a token that names a key not known (the keys
// were rotated).
const keysRefresh = 30 * time.Second

// keysWait bounds how long a request with a new token waits for the first
// fetch of the keys (made when the listener starts): a token that comes
// before them is metered by its caller's address.
const keysWait = 2 * time.Second

// signatureAlgorithms are those ServiceAccount tokens are signed with
// (the API server signs with RS256 or ES256): never none or a MAC.
var signatureAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512}

// KeyFetcher fetches the cluster's ServiceAccount issuer's key set.
type KeyFetcher func(ctx context.Context) (*jose.JSONWebKeySet, error)

// issuerKeys knows which namespace a ServiceAccount token of kfn's
// Audience is of before any TokenReview, from the token's claims once its
// signature is checked against the cluster's ServiceAccount issuer's keys,
// so that reviews can be metered per namespace: a token the cluster signed
// names its namespace truly; a made-up one (whatever it claims), one for
// another audience (which whoever it was given to could replay here) and a
// user's are attributed to none. It is safe for concurrent use.
type issuerKeys struct {
	fetchKeys KeyFetcher // nil: no keys, every token unattributed
	timeout   time.Duration
	log       *slog.Logger

	// first is the first fetch, closed once it ended.
	startFirst sync.Once
	first      chan struct{}

	mu       sync.Mutex
	keys     *jose.JSONWebKeySet // nil until fetched
	fetched  time.Time           // the last fetch's start, answered or not
	fetching bool
	failed   bool // the last fetch failed (logged once until one succeeds)
}

func newIssuerKeys(fetch KeyFetcher, timeout time.Duration, log *slog.Logger) *issuerKeys {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &issuerKeys{fetchKeys: fetch, timeout: timeout, log: log, first: make(chan struct{})}
}

// serviceAccountClaims are the claims of a bound ServiceAccount token
// (TokenRequest, projected volumes) that name its namespace. Legacy
// Secret-based tokens, which do not expire, are not attributed.
type serviceAccountClaims struct {
	jwt.Claims
	Kubernetes struct {
		Namespace string `json:"namespace"`
	} `json:"kubernetes.io"`
}

// namespaceOf returns the namespace of a ServiceAccount token of kfn's
// Audience that the cluster's issuer signed and that has not expired, or
// false for any other token (made up, a user's, for another audience,
// legacy, too long, or no keys known). It reviews nothing: TokenReview
// still decides whether the token is accepted.
func (k *issuerKeys) namespaceOf(ctx context.Context, token string, now time.Time) (string, bool) {
	if k == nil || k.fetchKeys == nil || len(token) > maxSignedToken {
		return "", false
	}
	tok, err := jwt.ParseSigned(token, signatureAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return "", false
	}
	key, ok := k.key(ctx, tok.Headers[0].KeyID, now)
	if !ok {
		return "", false
	}
	var c serviceAccountClaims
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", false
	}
	if c.Expiry == nil || c.ValidateWithLeeway(jwt.Expected{Time: now}, time.Minute) != nil ||
		!slices.Contains(c.Audience, Audience) {
		return "", false
	}
	return c.Kubernetes.Namespace, c.Kubernetes.Namespace != ""
}

// key returns the issuer's key of that id. Before the first fetch ended it
// waits for it, at most keysWait (starting it when Run has not); a key id
// not known starts a fetch in the background, at most every keysRefresh,
// so that after a rotation new tokens are unattributed for a moment
// rather than wait.
func (k *issuerKeys) key(ctx context.Context, id string, now time.Time) (jose.JSONWebKey, bool) {
	if id == "" {
		return jose.JSONWebKey{}, false
	}
	k.startFirst.Do(func() { go k.fetch(context.WithoutCancel(ctx), true) })
	wait := time.NewTimer(keysWait)
	select {
	case <-k.first:
	case <-wait.C:
	case <-ctx.Done():
	}
	wait.Stop()
	k.mu.Lock()
	keys := k.keys
	stale := !k.fetching && now.Sub(k.fetched) >= keysRefresh
	k.mu.Unlock()
	if keys != nil {
		if found := keys.Key(id); len(found) > 0 && found[0].Valid() && found[0].IsPublic() {
			return found[0], true
		}
	}
	if stale {
		go k.fetch(context.WithoutCancel(ctx), false)
	}
	return jose.JSONWebKey{}, false
}

// follow fetches the keys at once and every keysRefresh until ctx ends.
func (k *issuerKeys) follow(ctx context.Context) {
	if k == nil || k.fetchKeys == nil {
		return
	}
	byRequest := true
	k.startFirst.Do(func() { k.fetch(ctx, true); byRequest = false })
	if byRequest { // a request started the first fetch: it ends it
		select {
		case <-k.first:
		case <-ctx.Done():
			return
		}
	}
	t := time.NewTicker(keysRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.fetch(ctx, false)
		}
	}
}

// fetch fetches the issuer's keys, unless another fetch runs (the first
// always does); on failure the keys known stay, and the first failure
// after a success is logged. The first fetch closes k.first when it ends.
func (k *issuerKeys) fetch(ctx context.Context, first bool) {
	k.mu.Lock()
	if k.fetching && !first {
		k.mu.Unlock()
		return
	}
	k.fetching, k.fetched = true, time.Now()
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	keys, err := k.fetchKeys(ctx)
	k.mu.Lock()
	k.fetching = false
	switch {
	case err == nil:
		k.keys, k.failed = keys, false
	case !k.failed:
		k.failed = true
		k.log.Warn("cannot read the cluster's ServiceAccount issuer keys: new bearer tokens are metered by caller address, not by namespace (grant get on "+jwksPath+")", "error", err)
	}
	k.mu.Unlock()
	if first {
		close(k.first)
	}
}

// known says whether the issuer's keys were fetched, and there are any.
func (k *issuerKeys) known() bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys != nil && len(k.keys.Keys) > 0
}

// restKeys fetches the issuer's key set from the API server of client.
func restKeys(client rest.Interface) KeyFetcher {
	if client == nil {
		return nil
	}
	return func(ctx context.Context) (*jose.JSONWebKeySet, error) {
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
}
