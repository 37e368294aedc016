package jwtrule_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/jwtrule"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/test/jwttest"
)

// TestKeySetsFollowARotationAtMostEveryMinRefetch: a token signed with a
// key the cached set does not have fetches the set again, once per
// MinRefetch however many such tokens come; the new key then verifies.
func TestKeySetsFollowARotationAtMostEveryMinRefetch(t *testing.T) {
	is := jwttest.NewIssuer(t)
	ctx := context.Background()
	slow := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback, MinRefetch: time.Hour})
	r := rule(t, is)
	require.Nil(t, r.Check(ctx, slow, bearer(is.Token(nil))))
	is.AddRSA("rsa-2")
	rotated := is.Sign("rsa-2", is.Claims(time.Hour), nil)
	for range 20 {
		assert.Equal(t, http.StatusUnauthorized, status(r.Check(ctx, slow, bearer(rotated))))
	}
	assert.EqualValues(t, 1, is.Fetches.Load(), "unknown keys fetch the set at most every MinRefetch")

	fast := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback, MinRefetch: time.Nanosecond})
	require.Nil(t, r.Check(ctx, fast, bearer(is.Token(nil))))
	is.AddEC("ec-3")
	assert.Nil(t, r.Check(ctx, fast, bearer(is.Sign("ec-3", is.Claims(time.Hour), nil))), "the rotated key, fetched again")
	assert.EqualValues(t, 3, is.Fetches.Load())
}

// TestKeySetsKeepTheirKeysWhenAFetchFails: once the issuer is down, the
// keys fetched before still verify (each fetch again failing).
func TestKeySetsKeepTheirKeysWhenAFetchFails(t *testing.T) {
	is := jwttest.NewIssuer(t)
	ctx := context.Background()
	keys := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback, Refresh: time.Nanosecond, MinRefetch: time.Nanosecond})
	r := rule(t, is)
	token := is.Token(nil)
	require.Nil(t, r.Check(ctx, keys, bearer(token)))
	is.Down.Store(true)
	for range 3 {
		assert.Nil(t, r.Check(ctx, keys, bearer(token)))
	}
	assert.Greater(t, is.Fetches.Load(), int32(1), "refreshed, and failed")

	down := jwttest.NewIssuer(t)
	down.Down.Store(true)
	d := rule(t, down).Check(ctx, keys, bearer(down.Token(nil)))
	require.NotNil(t, d)
	assert.Equal(t, http.StatusUnauthorized, d.Status)
	assert.Contains(t, d.Reason, "Jwks remote fetch failed")
	assert.Contains(t, d.Reason, "503")
}

// TestKeySetsAreBoundedInBytesTimeAndWhereTheyAreFetched: a jwksUri is a
// tenant's: a set larger than MaxBytes, one that does not come within
// Timeout, one that has no signing key, and one at an address the egress
// rules refuse (the cloud metadata address; loopback, on a cluster) give
// no keys.
func TestKeySetsAreBoundedInBytesTimeAndWhereTheyAreFetched(t *testing.T) {
	ctx := context.Background()
	big := jwttest.NewIssuer(t)
	huge := []byte(`{"keys":[` + strings.Repeat(" ", 300<<10) + `]}`)
	big.Body.Store(&huge)
	_, err := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback}).Keys(ctx, big.JWKS(), "")
	assert.ErrorIs(t, err, jwtrule.ErrNoKeys)
	assert.ErrorContains(t, err, "larger than 262144 bytes")

	empty := jwttest.NewIssuer(t)
	none := []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","use":"enc"}]}`)
	empty.Body.Store(&none)
	_, err = jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback}).Keys(ctx, empty.JWKS(), "")
	assert.ErrorContains(t, err, "no signing key")

	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	start := time.Now()
	_, err = jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: loopback, Timeout: 200 * time.Millisecond}).Keys(ctx, hang.URL, "")
	assert.ErrorIs(t, err, jwtrule.ErrNoKeys)
	assert.Less(t, time.Since(start), 5*time.Second)

	is := jwttest.NewIssuer(t)
	cluster := jwtrule.NewKeySets(jwtrule.KeySetConfig{Egress: egress.Policy{}})
	for _, uri := range []string{is.JWKS(), "http://169.254.169.254/latest/meta-data/jwks"} {
		_, err = cluster.Keys(ctx, uri, "")
		assert.True(t, errors.Is(err, jwtrule.ErrNoKeys) && strings.Contains(err.Error(), egress.ErrRefused.Error()), "%s: %v", uri, err)
	}
	assert.Zero(t, is.Fetches.Load(), "nothing reached the loopback issuer")
}
