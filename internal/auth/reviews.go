package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	webhooktoken "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// ErrTooManyReviews is returned, and answered 429, when a listener's
// callers send more bearer tokens not seen before than
// KubernetesConfig.NewTokensPerSecond, or one caller (an address) more
// than its share of them: each needs a TokenReview of the API server,
// which made-up tokens would otherwise flood.
var ErrTooManyReviews = errors.New("too many new bearer tokens to review; retry later")

// errRefused is the reason given for a bearer token whose refusal a
// review answered before.
var errRefused = errors.New("the cluster refused this bearer token")

// audience is whom a bearer token is for, as a review asks it.
type audience byte

const (
	// forKfn: kfn's Audience; taken on every listener.
	forKfn audience = iota
	// forAPIServer: the API server's own audiences (a user's kubeconfig
	// token); taken over TLS only.
	forAPIServer
)

// sourceShare is the part of a listener's budget of new tokens that one
// caller address may spend.
const sourceShare = 10

// maxSources bounds the callers a budget follows.
const maxSources = 10000

// tokenKey is what the verdicts keep of a token: its SHA-256, with the
// audience it was reviewed for.
type tokenKey [sha256.Size]byte

func keyOf(a audience, token string) tokenKey {
	h := sha256.New()
	h.Write([]byte{byte(a)})
	h.Write([]byte(token))
	return tokenKey(h.Sum(nil))
}

// verdicts keeps, for ttl, the tokens reviews accepted and those they
// refused (at most max of each), for every listener: an accepted token
// goes through without spending a budget (the delegate keeps the review's
// answer), a refused one is answered 401 without a review, so repeating a
// made-up token costs one review in ttl.
type verdicts struct {
	ttl time.Duration
	max int

	mu       sync.Mutex
	accepted map[tokenKey]time.Time // -> when to forget it
	refused  map[tokenKey]time.Time
}

func newVerdicts(ttl time.Duration, max int) *verdicts {
	return &verdicts{ttl: ttl, max: max, accepted: map[tokenKey]time.Time{}, refused: map[tokenKey]time.Time{}}
}

// get says whether a review accepted or refused k within ttl.
func (v *verdicts) get(k tokenKey, now time.Time) (accepted, refused bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	until, a := v.accepted[k]
	accepted = a && now.Before(until)
	until, r := v.refused[k]
	refused = r && now.Before(until)
	return accepted, refused
}

func (v *verdicts) accept(k tokenKey, now time.Time) { v.put(v.accepted, k, now) }
func (v *verdicts) refuse(k tokenKey, now time.Time) { v.put(v.refused, k, now) }

// put keeps k in m for ttl; when max are kept, the expired ones are
// dropped first, then any one.
func (v *verdicts) put(m map[tokenKey]time.Time, k tokenKey, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(m) >= v.max {
		for k, until := range m {
			if !now.Before(until) {
				delete(m, k)
			}
		}
		for k := range m {
			if len(m) < v.max {
				break
			}
			delete(m, k)
		}
	}
	m[k] = now.Add(v.ttl)
}

// budget meters the TokenReviews of one listener's tokens not seen before:
// at most perSecond in all (bursts of burst), and a sourceShare-th of
// that for one caller address, so that a caller sending made-up tokens
// spends its own share, not the others'.
type budget struct {
	total       *rate.Limiter
	sourceRate  rate.Limit
	sourceBurst int

	mu      sync.Mutex
	sources map[string]*rate.Limiter
}

func newBudget(perSecond float64, burst int) *budget {
	return &budget{
		total:      rate.NewLimiter(rate.Limit(perSecond), burst),
		sourceRate: rate.Limit(perSecond / sourceShare), sourceBurst: max(1, burst/sourceShare),
		sources: map[string]*rate.Limiter{},
	}
}

// allow takes one review from source's share and from the total, or
// neither.
func (b *budget) allow(source string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.sources[source]
	if !ok {
		if len(b.sources) >= maxSources {
			b.forget(now)
		}
		l = rate.NewLimiter(b.sourceRate, b.sourceBurst)
		b.sources[source] = l
	}
	r := l.ReserveN(now, 1)
	if !r.OK() || r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return false
	}
	if !b.total.AllowN(now, 1) {
		r.CancelAt(now)
		return false
	}
	return true
}

// forget drops the sources whose share is whole again (as a new source's
// would be), then, if as many are still kept, any one. b.mu is held.
func (b *budget) forget(now time.Time) {
	for s, l := range b.sources {
		if l.TokensAt(now) >= float64(b.sourceBurst) {
			delete(b.sources, s)
		}
	}
	for s := range b.sources {
		if len(b.sources) < maxSources {
			break
		}
		delete(b.sources, s)
	}
}

// source is the address a request comes from.
func source(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// reviews authenticates a listener's callers: a client certificate
// against the cluster's client CA, a bearer token by TokenReview, for
// kfn's audience on every listener and for the API server's only over TLS,
// so that a listener over plain HTTP never takes a token the API server
// would (which whoever sees it could replay there). A token the verdicts
// do not know spends the listener's budget; one they refused is not
// reviewed again.
type reviews struct {
	certificates, tokens authenticator.Request
	verdicts             *verdicts
}

// authenticate authenticates r, spending b for tokens not seen before.
func (v *reviews) authenticate(r *http.Request, b *budget) (*authenticator.Response, bool, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		if resp, ok, err := v.certificates.AuthenticateRequest(r); ok && err == nil {
			return resp, true, nil
		}
	}
	token, ok := bearer(r)
	if !ok {
		return nil, false, nil
	}
	audiences := []audience{forKfn}
	if r.TLS != nil {
		audiences = append(audiences, forAPIServer)
	}
	now := time.Now()
	var errs []error
	var ask []audience
	known := false
	for _, a := range audiences {
		accepted, refused := v.verdicts.get(keyOf(a, token), now)
		if refused {
			errs = append(errs, errRefused)
			continue
		}
		known = known || accepted
		ask = append(ask, a)
	}
	// A new token is one review of the budget, for whichever audiences.
	if len(ask) > 0 && !known && !b.allow(source(r), now) {
		return nil, false, ErrTooManyReviews
	}
	for _, a := range ask {
		ctx := r.Context()
		if a == forKfn {
			// A review checks audiences only when the context names them.
			ctx = authenticator.WithAudiences(ctx, authenticator.Audiences{Audience})
		}
		resp, ok, err := v.tokens.AuthenticateRequest(r.WithContext(ctx))
		if ok && err == nil {
			v.verdicts.accept(keyOf(a, token), now)
			return resp, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, false, errors.Join(errs...)
}

// newTokenReviews authenticates a request's bearer token (Authorization
// only) by TokenReview, as apiserver's delegating authenticator does (for
// the audiences the request's context names, else the API server's), and
// records each token a review refused in verdicts.
func newTokenReviews(client authenticationv1client.AuthenticationV1Interface, verdicts *verdicts, backoff wait.Backoff, timeout, ttl time.Duration) (authenticator.Request, error) {
	webhook, err := webhooktoken.NewFromInterface(client, nil, backoff, timeout, webhooktoken.AuthenticatorMetrics{
		RecordRequestTotal:   recordReviewCode,
		RecordRequestLatency: func(context.Context, string, float64) {},
	})
	if err != nil {
		return nil, fmt.Errorf("token review authenticator: %w", err)
	}
	cached := cache.New(refusals{next: webhook, verdicts: verdicts}, false, ttl, ttl)
	return group.NewAuthenticatedGroupAdder(bearertoken.New(cached)), nil
}

// refusals records in verdicts each token a review refused. The webhook
// answers a refusal with the review's reason as an error, which its cache
// does not keep (it keeps no answer that came with an error): without
// them a made-up token would be reviewed at every request.
type refusals struct {
	next     authenticator.Token
	verdicts *verdicts
}

// reviewCode is the context key of where recordReviewCode writes the
// status code of a review's answer.
type reviewCode struct{}

func recordReviewCode(ctx context.Context, code string) {
	if p, ok := ctx.Value(reviewCode{}).(*string); ok {
		*p = code
	}
}

// AuthenticateToken implements authenticator.Token.
func (r refusals) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	code := new(string)
	resp, ok, err := r.next.AuthenticateToken(context.WithValue(ctx, reviewCode{}, code), token)
	if !ok && strings.HasPrefix(*code, "2") { // the API server answered the review: a refusal
		a := forAPIServer
		if auds, _ := authenticator.AudiencesFrom(ctx); auds.Has(Audience) {
			a = forKfn
		}
		r.verdicts.refuse(keyOf(a, token), time.Now())
	}
	return resp, ok, err
}
