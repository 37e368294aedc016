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
	"golang.org/x/time/rate"
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

// TestManyNamespacesEachKeepAShare: four namespaces flooding the listener
// with new tokens (1,000 a second each, of a budget of 100), and made-up
// tokens from 1,000 addresses at as many, do not spend the whole budget
// once a fifth namespace sends its own: the five have half the budget in
// equal parts (10 a second each), the made-up tokens the other half, and
// the fifth namespace's new tokens (10 a second) are reviewed, for as
// long as it sends them. With fixed quarters the four spent it all: each
// review the total refilled went to whichever of them asked first. Once
// the fifth stops for activeFor, the four have an eighth each again.
func TestManyNamespacesEachKeepAShare(t *testing.T) {
	b := newBudget(100, 500)
	start := time.Now()
	heavy := []string{"a", "b", "c", "d"}
	var fifthAsked, fifthReviewed, heavyLate, madeUp int
	shareOfA := func() rate.Limit { return b.namespaces.m["a"].l.Limit() }
	for ms := range 100_000 {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		for _, ns := range heavy {
			if b.allow(caller{address: "10.0.0." + ns, namespace: ns}, true, now) && ms >= 90_000 {
				heavyLate++
			}
		}
		if b.allow(caller{address: "10.1.0." + strconv.Itoa(ms%1000)}, true, now) && ms >= 40_000 && ms < 60_000 {
			madeUp++
		}
		if ms >= 5_000 && ms < 60_000 && ms%100 == 0 {
			ok := b.allow(caller{address: "10.0.1.1", namespace: "e"}, true, now)
			if ms >= 40_000 {
				fifthAsked++
				if ok {
					fifthReviewed++
				}
			}
		}
		if ms == 50_000 {
			assert.Equal(t, rate.Limit(10), shareOfA(), "five namespaces: a tenth each")
			assert.Equal(t, 50, b.namespaces.m["a"].l.Burst(), "and a tenth of the burst")
		}
	}
	assert.Equal(t, 200, fifthAsked)
	assert.GreaterOrEqual(t, fifthReviewed, 195, "the fifth namespace's new tokens are reviewed beside four busy ones and a flood of made-up tokens")
	assert.InDelta(t, 50*20, madeUp, 20, "the made-up tokens have their half")
	assert.Equal(t, rate.Limit(12.5), shareOfA(), "once the fifth stopped, the four have an eighth each")
	assert.InDelta(t, 50*10, heavyLate, 10, "and half the total between them")
}

// TestANamespaceIsCountedOnce: a namespace the last count took in is not
// counted again when it asks past activeFor before the next count (its
// share and the others' would shrink for nothing), and one the last count
// left out is counted in when it asks again.
func TestANamespaceIsCountedOnce(t *testing.T) {
	b := newBudget(100, 500)
	start := time.Now()
	at := func(d time.Duration, ns string) {
		b.allow(caller{address: "10.0.0.1", namespace: ns}, true, start.Add(d))
	}
	at(0, "a")
	assert.Equal(t, rate.Limit(25), b.namespaces.m["a"].l.Limit(), "alone: a quarter")
	assert.Equal(t, 125, b.namespaces.m["a"].l.Burst())
	at(9900*time.Millisecond, "b") // a count: a (9.9 s ago) and b
	require.Equal(t, 2, b.namespaces.active)
	at(10200*time.Millisecond, "a") // 10.2 s after its last ask, but counted 0.3 s ago
	assert.Equal(t, 2, b.namespaces.active, "a is counted once")
	at(21*time.Second, "b") // a count: a (10.8 s ago) left out
	require.Equal(t, 1, b.namespaces.active)
	at(21500*time.Millisecond, "a")
	assert.Equal(t, 2, b.namespaces.active, "a asking again is counted in")
}
