package auth

import (
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

func withToken(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// TestNewTokensAreReviewedAtABoundedRate: past the burst, tokens not seen
// before are refused without a review (ErrTooManyReviews), while a token
// accepted before and requests without a token still go through; the
// tokens kept are bounded.
func TestNewTokensAreReviewedAtABoundedRate(t *testing.T) {
	next := &countingReviews{}
	v := newReviews(next, 0.001, 3, time.Minute, 2)
	_, ok, err := v.AuthenticateRequest(withToken("good"))
	require.NoError(t, err)
	require.True(t, ok)
	for i := range 2 {
		_, ok, err := v.AuthenticateRequest(withToken("made-up-" + strconv.Itoa(i)))
		assert.NoError(t, err, "within the burst: reviewed")
		assert.False(t, ok)
	}
	asked := next.asked
	for i := range 50 {
		_, _, err := v.AuthenticateRequest(withToken("flood-" + strconv.Itoa(i)))
		assert.ErrorIs(t, err, ErrTooManyReviews)
	}
	assert.Equal(t, asked, next.asked, "no review past the rate")
	_, ok, err = v.AuthenticateRequest(withToken("good"))
	assert.NoError(t, err)
	assert.True(t, ok, "a token accepted before is not held back by the flood")
	_, _, err = v.AuthenticateRequest(withToken(""))
	assert.NoError(t, err, "no bearer token (a client certificate): not limited")

	for i := range 5 {
		v.remember([32]byte{byte(i)}, time.Now())
	}
	assert.LessOrEqual(t, len(v.known), 2, "the accepted tokens kept are bounded")
}
