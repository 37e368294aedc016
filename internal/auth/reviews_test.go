package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// countingReviews stands in for the TokenReviews (which
// TestKubernetesAuthenticatesAndAuthorizesAsTheAPIServer makes for real):
// it accepts the token "good" and counts what it is asked.
type countingReviews struct{ asked int }

func (c *countingReviews) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	c.asked++
	if r.Header.Get("Authorization") == "Bearer good" {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "good"}}, true, nil
	}
	return nil, false, nil
}

func withToken(token, from string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = from + ":40000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// TestNewTokensAreReviewedAtABoundedRate: past a caller's share, and past
// the listener's total, tokens not seen before are refused without a
// review (ErrTooManyReviews), while a token accepted before and requests
// without a token still go through; a made-up token refused before costs
// no review and no budget; the verdicts and callers kept are bounded.
func TestNewTokensAreReviewedAtABoundedRate(t *testing.T) {
	next := &countingReviews{}
	v := &reviews{certificates: next, tokens: next, verdicts: newVerdicts(time.Minute, 2)}
	b := newBudget(0.001, 30) // a caller's share: 3
	_, ok, err := v.authenticate(withToken("good", "10.0.0.1"), b)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range 2 {
		_, ok, err := v.authenticate(withToken("made-up-"+strconv.Itoa(i), "10.0.0.1"), b)
		assert.NoError(t, err, "within the caller's share: reviewed")
		assert.False(t, ok)
	}
	asked := next.asked
	for i := range 50 {
		_, _, err := v.authenticate(withToken("flood-"+strconv.Itoa(i), "10.0.0.1"), b)
		assert.ErrorIs(t, err, ErrTooManyReviews)
	}
	assert.Equal(t, asked, next.asked, "no review past the caller's share")
	_, ok, err = v.authenticate(withToken("good", "10.0.0.1"), b)
	assert.NoError(t, err)
	assert.True(t, ok, "a token accepted before is not held back by the flood")
	_, _, err = v.authenticate(withToken("", "10.0.0.1"), b)
	assert.NoError(t, err, "no bearer token (a client certificate): not limited")

	v.verdicts.refuse(keyOf(forKfn, "refused-before"), time.Now())
	v.verdicts.refuse(keyOf(forAPIServer, "refused-before"), time.Now())
	asked = next.asked
	_, ok, err = v.authenticate(withToken("refused-before", "10.0.0.1"), b)
	assert.ErrorIs(t, err, errRefused)
	assert.False(t, ok)
	assert.Equal(t, asked, next.asked, "a token refused before is not reviewed again")

	// Other callers share the rest of the total: 27 more reviews.
	reviewed := 0
	for i := range 100 {
		if _, _, err := v.authenticate(withToken("other-"+strconv.Itoa(i), "10.0.1."+strconv.Itoa(i)), b); !errors.Is(err, ErrTooManyReviews) {
			reviewed++
		}
	}
	assert.Equal(t, 27, reviewed, "the listener's total holds whatever the callers")

	for i := range 5 {
		v.verdicts.accept(tokenKey{byte(i)}, time.Now())
	}
	assert.LessOrEqual(t, len(v.verdicts.accepted), 2, "the accepted tokens kept are bounded")
	for i := range maxSources + 10 {
		b.allow(caller{address: "10.1." + strconv.Itoa(i)}, false, time.Now())
		b.allow(caller{namespace: "ns-" + strconv.Itoa(i)}, false, time.Now())
	}
	assert.LessOrEqual(t, len(b.sources.m), maxSources, "the callers followed are bounded")
	assert.LessOrEqual(t, len(b.namespaces.m), maxSources, "the namespaces followed are bounded")
}

// TestANamespaceAloneScalesOutPastItsShare: with no other namespace
// sending new tokens, one namespace's go past its share (a quarter of the
// burst) down to half the total, so a scale-out of 250 pods is reviewed at
// once; another namespace then still has its whole share, and the first
// nothing more.
func TestANamespaceAloneScalesOutPastItsShare(t *testing.T) {
	b := newBudget(100, 500)
	now := time.Now()
	count := func(c caller) int {
		n := 0
		for b.allow(c, true, now) {
			n++
		}
		return n
	}
	a := count(caller{address: "10.0.0.1", namespace: "a"})
	assert.InDelta(t, 250, a, 2, "its share (125) and the total down to half")
	assert.Equal(t, 125, count(caller{address: "10.0.0.2", namespace: "b"}), "another namespace's share is whole")
	assert.False(t, b.allow(caller{address: "10.0.0.3", namespace: "a"}, true, now))
	assert.Equal(t, 50, count(caller{address: "10.0.0.4"}), "an address's unattributed tokens have their own share (a tenth)")
}
