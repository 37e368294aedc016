package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.at = c.at.Add(d)
	c.mu.Unlock()
}

// apiServer stands in for the API server's reviews and decisions (which
// TestKubernetesAuthenticatesAndAuthorizesAsTheAPIServer makes for real):
// what a renewal must show is when it asks, and what it serves meanwhile,
// which a real API server answers too fast and too late to time. It
// accepts the tokens and allows the users in accept, fails while down,
// and counts the reviews it answered; each answer waits for release when
// hold is set.
type apiServer struct {
	mu      sync.Mutex
	accept  map[string]bool
	down    bool
	reviews int
	hold    chan struct{}
	asked   chan struct{}
}

func newAPIServer(accept ...string) *apiServer {
	s := &apiServer{accept: map[string]bool{}, asked: make(chan struct{}, 100)}
	for _, a := range accept {
		s.accept[a] = true
	}
	return s
}

func (s *apiServer) answer(ctx context.Context, name string) (ok bool, err error) {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.asked <- struct{}{} }()
	if err := ctx.Err(); err != nil {
		return false, err // a review whose request was cancelled
	}
	if s.down {
		return false, errors.New("the API server is down")
	}
	s.reviews++
	return s.accept[name], nil
}

func (s *apiServer) set(f func(s *apiServer)) { s.mu.Lock(); f(s); s.mu.Unlock() }

func (s *apiServer) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.reviews }

// AuthenticateToken reviews a token as the webhook and refusals do: a
// refusal is an error of its own kind.
func (s *apiServer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ok, err := s.answer(ctx, token)
	switch {
	case err != nil:
		return nil, false, err
	case !ok:
		return nil, false, refusal{errors.New("token refused")}
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: token}}, true, nil
}

// Authorize decides as a SubjectAccessReview would.
func (s *apiServer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	ok, err := s.answer(ctx, a.GetUser().GetName())
	switch {
	case err != nil:
		return authorizer.DecisionNoOpinion, "", err
	case !ok:
		return authorizer.DecisionNoOpinion, "no RBAC rule", nil
	}
	return authorizer.DecisionAllow, "", nil
}

// waitAsked waits for the API server to have answered once more.
func (s *apiServer) waitAsked(t *testing.T) {
	t.Helper()
	select {
	case <-s.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the API server was not asked")
	}
}

// drainAsked forgets the answers noted so far.
func (s *apiServer) drainAsked() {
	for {
		select {
		case <-s.asked:
		default:
			return
		}
	}
}

// TestAUsedTokenIsReviewedAgainBeforeItsTimeEnds: a token used in the
// second half of its kept review is reviewed again in the background
// while the kept review answers, so a caller that keeps calling waits for
// no review after its first; a token the cluster stops accepting is
// refused from the renewal's answer on; when the API server cannot answer
// a renewal, the kept review lasts its time, no more; a token unused for
// the whole time is reviewed again, in the call.
func TestAUsedTokenIsReviewedAgainBeforeItsTimeEnds(t *testing.T) {
	const ttl = time.Minute
	api := newAPIServer("bridge")
	clk := &clock{at: time.Unix(1_000_000, 0)}
	answers := newRenewal[*authenticator.Response](maxKept, time.Second)
	answers.now = clk.now
	tokens := renewedTokens{next: api, ttl: ttl, answers: answers}
	ctx := context.Background()
	accepted := func(token string) bool {
		t.Helper()
		resp, ok, err := tokens.AuthenticateToken(ctx, token)
		if ok {
			require.NoError(t, err)
			assert.Equal(t, token, resp.User.GetName())
		}
		return ok
	}

	require.True(t, accepted("bridge"))
	assert.Equal(t, 1, api.count(), "the first call is reviewed")
	api.drainAsked()
	clk.add(ttl / 4)
	require.True(t, accepted("bridge"))
	assert.Equal(t, 1, api.count(), "within the first half: kept")

	// In the second half: answered at once from the kept review, and
	// reviewed again behind it.
	clk.add(ttl / 2)
	hold := make(chan struct{})
	api.set(func(s *apiServer) { s.hold = hold })
	require.True(t, accepted("bridge"), "answered while the renewal waits for the API server")
	require.True(t, accepted("bridge"))
	close(hold)
	api.waitAsked(t)
	api.set(func(s *apiServer) { s.hold = nil })
	assert.Equal(t, 2, api.count(), "one renewal, however many calls")

	// Past the first review's time, within the renewal's (and before its
	// own second half): no review in the call.
	clk.add(ttl / 4)
	require.True(t, accepted("bridge"))
	assert.Equal(t, 2, api.count(), "the renewed review answers: the caller waits for none")

	// The cluster stops accepting the token: refused from the next
	// renewal's answer on.
	api.set(func(s *apiServer) { s.accept["bridge"] = false })
	clk.add(ttl / 2)
	require.True(t, accepted("bridge"), "the kept review answers while the renewal is asked")
	api.waitAsked(t)
	require.Eventually(t, func() bool { return !accepted("bridge") }, 10*time.Second, time.Millisecond,
		"refused once the renewal's review refused it")

	// An API server that cannot answer a renewal: the kept review lasts
	// its time, then the token is reviewed in the call.
	api.set(func(s *apiServer) { s.accept["bridge"] = true })
	require.True(t, accepted("bridge"))
	reviews := api.count()
	api.drainAsked()
	api.set(func(s *apiServer) { s.down = true })
	clk.add(ttl * 3 / 4)
	require.True(t, accepted("bridge"))
	api.waitAsked(t)
	require.True(t, accepted("bridge"), "a renewal that failed leaves the kept review")
	clk.add(ttl / 4)
	resp, ok, err := tokens.AuthenticateToken(ctx, "bridge")
	assert.False(t, ok, "no review kept past its time: %v", resp)
	assert.ErrorContains(t, err, "down")
	api.set(func(s *apiServer) { s.down = false })
	require.True(t, accepted("bridge"))
	assert.Equal(t, reviews+1, api.count(), "reviewed in the call once the kept review ended")

	// Unused for the whole time: reviewed in the call, not from the
	// old review.
	clk.add(ttl)
	require.True(t, accepted("bridge"))
	assert.Equal(t, reviews+2, api.count())
}

// TestACallerThatGoesAwayFailsNoOtherCaller: a review is asked for with a
// context of its own, not the first caller's (the callers that arrive
// together share it): a caller whose request is gone still gets the
// review, which is kept for the next.
func TestACallerThatGoesAwayFailsNoOtherCaller(t *testing.T) {
	api := newAPIServer("pod")
	tokens := renewedTokens{next: api, ttl: time.Minute, answers: newRenewal[*authenticator.Response](maxKept, 10*time.Second)}
	gone, leave := context.WithCancel(context.Background())
	leave()
	mustAccept(t, tokens, gone, "pod", "the review was not cancelled with its first caller")
	mustAccept(t, tokens, context.Background(), "pod")
	assert.Equal(t, 1, api.count(), "the next caller is answered from the kept review")
}

// mustAccept fails t unless tokens accept token, with ctx, without error.
func mustAccept(t *testing.T, tokens renewedTokens, ctx context.Context, token string, why ...any) {
	t.Helper()
	_, ok, err := tokens.AuthenticateToken(ctx, token)
	require.NoError(t, err, why...)
	require.True(t, ok, why...)
}

// TestAReviewIsKeptPerAudience: a token's review for kfn's audience does
// not answer for another audience.
func TestAReviewIsKeptPerAudience(t *testing.T) {
	api := newAPIServer("pod")
	tokens := renewedTokens{next: api, ttl: time.Minute, answers: newRenewal[*authenticator.Response](maxKept, time.Second)}
	forKfn := authenticator.WithAudiences(context.Background(), authenticator.Audiences{Audience})
	mustAccept(t, tokens, forKfn, "pod")
	mustAccept(t, tokens, context.Background(), "pod")
	assert.Equal(t, 2, api.count(), "one review per audience")
}

// TestAnAllowedDecisionIsRenewedAndADenialIsNot: an allowed decision
// asked for in the second half of its time is asked again behind the kept
// one, and a permission revoked meanwhile is denied from that answer on;
// a denial is kept a tenth of the time and not renewed, so a permission
// granted since is allowed once it ends; an error is not kept.
func TestAnAllowedDecisionIsRenewedAndADenialIsNot(t *testing.T) {
	const ttl = time.Minute
	api := newAPIServer("bridge")
	clk := &clock{at: time.Unix(1_000_000, 0)}
	answers := newRenewal[decision](maxKept, time.Second)
	answers.now = clk.now
	authz := renewedDecisions{next: api, allowed: ttl, denied: ttl / 10, answers: answers}
	ctx := context.Background()
	askErr := func(who string) (authorizer.Decision, error) {
		d, _, err := authz.Authorize(ctx, authorizer.AttributesRecord{User: &user.DefaultInfo{Name: who}, Verb: "create",
			Resource: "functions", Subresource: "claim", ResourceRequest: true})
		return d, err
	}
	ask := func(who string) authorizer.Decision { d, _ := askErr(who); return d }

	require.Equal(t, authorizer.DecisionAllow, ask("bridge"))
	api.drainAsked()
	clk.add(ttl * 3 / 4)
	require.Equal(t, authorizer.DecisionAllow, ask("bridge"))
	api.waitAsked(t)
	clk.add(ttl / 4)
	assert.Equal(t, authorizer.DecisionAllow, ask("bridge"), "renewed: the caller waits for no review")
	assert.Equal(t, 2, api.count())

	api.set(func(s *apiServer) { s.accept["bridge"] = false })
	clk.add(ttl / 2)
	assert.Equal(t, authorizer.DecisionAllow, ask("bridge"), "kept while the renewal is asked")
	api.waitAsked(t)
	require.Eventually(t, func() bool { return ask("bridge") != authorizer.DecisionAllow }, 10*time.Second, time.Millisecond,
		"denied once the renewal's decision denied it")

	// The denial is kept a tenth of the time, not renewed.
	reviews := api.count()
	api.set(func(s *apiServer) { s.accept["bridge"] = true })
	clk.add(ttl / 20)
	assert.NotEqual(t, authorizer.DecisionAllow, ask("bridge"), "the denial is kept")
	assert.Equal(t, reviews, api.count(), "and not renewed")
	clk.add(ttl / 20)
	assert.Equal(t, authorizer.DecisionAllow, ask("bridge"), "asked again once the denial's time ended")

	// Another caller's decision is its own; an error is not kept.
	api.set(func(s *apiServer) { s.down = true })
	_, err := askErr("other")
	assert.ErrorContains(t, err, "down")
	api.set(func(s *apiServer) { s.down = false; s.accept["other"] = true })
	assert.Equal(t, authorizer.DecisionAllow, ask("other"))
}

// TestRenewalKeepsAtMostMax: past max answers the expired ones go first,
// then any; the newest is kept.
func TestRenewalKeepsAtMostMax(t *testing.T) {
	clk := &clock{at: time.Unix(1_000_000, 0)}
	r := newRenewal[int](2, time.Second)
	r.now = clk.now
	r.put("old", fetched[int]{value: 1, keep: time.Second})
	clk.add(2 * time.Second)
	r.put("a", fetched[int]{value: 2, keep: time.Minute})
	r.put("b", fetched[int]{value: 3, keep: time.Minute})
	assert.Len(t, r.answers, 2)
	assert.Contains(t, r.answers, "a", "the expired one went first")
	r.put("c", fetched[int]{value: 4, keep: time.Minute})
	assert.Len(t, r.answers, 2)
	assert.Contains(t, r.answers, "c")
}

// TestDenialsGoBeforeKeptAllowances: past max answers, the denials (not
// renewed) go before the allowances callers keep using, so that a caller
// asking for ever new names it may not call (each a denial kept a while)
// cannot push out the others' decisions. Before, any answer went.
func TestDenialsGoBeforeKeptAllowances(t *testing.T) {
	clk := &clock{at: time.Unix(1_000_000, 0)}
	r := newRenewal[int](4, time.Second)
	r.now = clk.now
	r.put("allowed-a", fetched[int]{value: 1, keep: time.Minute, renew: true})
	r.put("allowed-b", fetched[int]{value: 2, keep: time.Minute, renew: true})
	for i := range 100 {
		r.put(fmt.Sprint("denied-", i), fetched[int]{value: 0, keep: 6 * time.Second})
	}
	assert.Len(t, r.answers, 4)
	assert.Contains(t, r.answers, "allowed-a")
	assert.Contains(t, r.answers, "allowed-b")
	assert.Contains(t, r.answers, "denied-99", "the newest is kept")
}
