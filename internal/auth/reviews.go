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
	webhooktoken "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// ErrTooManyReviews is returned, and answered 429, when a listener's
// callers send more bearer tokens not seen before than
// KubernetesConfig.NewTokensPerSecond, or one caller (an address) more
// than its share of them: each needs a TokenReview of the API server,
// which made-up tokens would otherwise flood.
var ErrTooManyReviews = errors.New("too many new bearer tokens to review; retry later")

// ErrTooManyChecks is returned by Kubernetes.Allow, and answered 429,
// when a caller asks for more decisions not kept than its share of
// KubernetesConfig.NewTokensPerSecond: each needs a SubjectAccessReview of
// the API server, which a caller asking for ever new names (a Function's,
// a dead letter's) would otherwise flood.
var ErrTooManyChecks = errors.New("too many access checks to ask the API server; retry later")

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

// namespaceShare is the largest part of a listener's budget of new tokens
// that the tokens of one namespace may spend (a scale-out of 125 pods at
// once, by default, before the others wait); with more than two
// namespaces sending new tokens (activeFor), each has an equal part of
// half the budget, so that together they leave the made-up tokens their
// half and each other their parts.
const namespaceShare = 4

// activeFor is how long a namespace that asked for a review counts among
// those sharing the budget.
const activeFor = 10 * time.Second

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
// at most perSecond in all (bursts of burst). A token the cluster's
// ServiceAccount issuer signed for kfn (issuerKeys) spends its namespace's
// share, wherever it comes from: a namespaceShare-th of the total, or a
// 2n-th while n > 2 namespaces asked within activeFor, so that however
// many namespaces send new tokens, their shares leave each one's and the
// made-up tokens' half; past its share it spends only what the total
// holds over half its burst; any other token (made up, whatever it
// claims, for another audience, or a user's) spends its
// caller address's share, a sourceShare-th, and, while the issuer's keys
// are known, together with every other such token at most half the total.
// So neither one namespace's pods, however many addresses they have, nor
// made-up tokens from many addresses, spend what other namespaces' new
// tokens need.
type budget struct {
	total, unattributed *rate.Limiter

	mu                  sync.Mutex
	namespaces, sources shares
}

// shares are a token bucket per key, each a part-th of the budget's rate
// and burst, or, with spread, a (spread x active)-th when that is less;
// kept under budget.mu.
type shares struct {
	rate   float64
	burst  int
	part   int
	spread int // 0: a fixed part
	m      map[string]*share
	// active counts the keys that asked within activeFor: a key the last
	// count left out (or new) is counted in when it asks, those that
	// stopped asking are counted out at the next count (every second).
	active  int
	counted time.Time
}

// share is one key's bucket, of rate and burst for divisor part, and when
// it last asked.
type share struct {
	l     *rate.Limiter
	part  int
	asked time.Time
}

// of returns key's bucket, made full when new, of the share it has now;
// when maxSources are kept, the full ones (as a new one would be) are
// dropped first, then any one.
func (s *shares) of(key string, now time.Time) *rate.Limiter {
	sh, ok := s.m[key]
	if !ok {
		if len(s.m) >= maxSources {
			s.evict(now)
		}
		sh = &share{}
		s.m[key] = sh
	}
	if s.spread > 0 {
		if !ok || s.counted.Sub(sh.asked) > activeFor {
			s.active++ // the last count left it out
		}
		sh.asked = now
		if now.Sub(s.counted) > time.Second {
			s.count(now)
		}
	}
	part := max(s.part, s.spread*s.active)
	switch {
	case sh.l == nil:
		sh.l, sh.part = rate.NewLimiter(rate.Limit(s.rate/float64(part)), max(1, s.burst/part)), part
	case sh.part != part:
		sh.l.SetLimitAt(now, rate.Limit(s.rate/float64(part)))
		sh.l.SetBurstAt(now, max(1, s.burst/part))
		sh.part = part
	}
	return sh.l
}

// count counts again the keys that asked within activeFor.
func (s *shares) count(now time.Time) {
	s.active, s.counted = 0, now
	for _, sh := range s.m {
		if now.Sub(sh.asked) <= activeFor {
			s.active++
		}
	}
}

// evict drops the full buckets (as a new one would be), then any one,
// until fewer than maxSources are kept.
func (s *shares) evict(now time.Time) {
	for k, sh := range s.m {
		if sh.l.TokensAt(now) >= float64(sh.l.Burst()) {
			delete(s.m, k)
		}
	}
	for k := range s.m {
		if len(s.m) < maxSources {
			break
		}
		delete(s.m, k)
	}
	if s.spread > 0 {
		s.count(now)
	}
}

func newBudget(perSecond float64, burst int) *budget {
	share := func(part, spread int) shares {
		return shares{rate: perSecond, burst: burst, part: part, spread: spread, m: map[string]*share{}}
	}
	return &budget{
		total:        rate.NewLimiter(rate.Limit(perSecond), burst),
		unattributed: rate.NewLimiter(rate.Limit(perSecond/2), max(1, burst/2)),
		namespaces:   share(namespaceShare, 2), sources: share(sourceShare, 0),
	}
}

// caller is who sends a new token: its address, and the namespace of the
// token when the cluster's issuer signed it ("" otherwise).
type caller struct {
	address, namespace string
}

// allow takes one review from the caller's share (its namespace's, or its
// address's and, when keysKnown, the unattributed tokens') and from the
// total, or from none. A namespace past its share still takes one from
// the total alone while the total holds more than half its burst: alone,
// a namespace scales out as before; under contention each has its share.
func (b *budget) allow(c caller, keysKnown bool, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.namespace != "" {
		if takeAll(now, b.namespaces.of(c.namespace, now), b.total) {
			return true
		}
		return b.total.TokensAt(now) >= float64(b.total.Burst())/2+1 && takeAll(now, b.total)
	}
	if keysKnown {
		return takeAll(now, b.sources.of(c.address, now), b.unattributed, b.total)
	}
	return takeAll(now, b.sources.of(c.address, now), b.total)
}

// exhausted says whether the total has no review left now: a new token is
// then refused before its signature is checked, which costs more than the
// refusal.
func (b *budget) exhausted(now time.Time) bool { return b.total.TokensAt(now) < 1 }

// takeAll takes one token of every limiter at now, or none.
func takeAll(now time.Time, limiters ...*rate.Limiter) bool {
	taken := make([]*rate.Reservation, 0, len(limiters))
	for _, l := range limiters {
		r := l.ReserveN(now, 1)
		if !r.OK() || r.DelayFrom(now) > 0 {
			r.CancelAt(now)
			for _, t := range taken {
				t.CancelAt(now)
			}
			return false
		}
		taken = append(taken, r)
	}
	return true
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
	// issuer attributes the tokens the cluster signed to their namespace.
	issuer *issuerKeys
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
	// A new token is one review of the budget, for whichever audiences,
	// spent from its namespace's share when the cluster signed it.
	if len(ask) > 0 && !known {
		if b.exhausted(now) {
			return nil, false, ErrTooManyReviews
		}
		c := caller{address: source(r)}
		c.namespace, _ = v.issuer.namespaceOf(r.Context(), token, now)
		if !b.allow(c, v.issuer.known(), now) {
			return nil, false, ErrTooManyReviews
		}
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
	kept := renewedTokens{next: refusals{next: webhook, verdicts: verdicts}, ttl: ttl, answers: newRenewal[*authenticator.Response](maxKept, timeout)}
	return group.NewAuthenticatedGroupAdder(bearertoken.New(kept)), nil
}

// maxKept bounds the reviews, and the decisions, a Kubernetes keeps.
const maxKept = 10000

// renewedTokens keeps each token a review accepted for ttl, for the
// audiences the review was for, and reviews it again in the background
// once used in the second half of that time (renewal): a caller that calls
// at least every ttl/2 waits for no review after its first; a token the
// cluster no longer accepts is refused from the renewal's answer on, and
// no acceptance served is older than ttl.
type renewedTokens struct {
	next    authenticator.Token
	ttl     time.Duration
	answers *renewal[*authenticator.Response]
}

// AuthenticateToken implements authenticator.Token.
func (t renewedTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	auds, _ := authenticator.AudiencesFrom(ctx)
	h := sha256.New()
	for _, a := range auds {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	h.Write([]byte{0})
	h.Write([]byte(token))
	resp, err := t.answers.get(ctx, string(h.Sum(nil)), func(ctx context.Context) fetched[*authenticator.Response] {
		resp, ok, err := t.next.AuthenticateToken(ctx, token)
		if ok && err == nil {
			return fetched[*authenticator.Response]{value: resp, keep: t.ttl, renew: true}
		}
		// A review that answered is a refusal: it withdraws a kept
		// acceptance; an error of the API server leaves it.
		var r refusal
		return fetched[*authenticator.Response]{err: err, refused: err == nil || errors.As(err, &r)}
	}, nil)
	if resp == nil {
		return nil, false, err
	}
	return resp, true, nil
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
		if err != nil {
			err = refusal{err}
		}
	}
	return resp, ok, err
}

// refusal is the error of a review the API server answered with a
// refusal (its message unchanged), as opposed to one it could not answer.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }
