package auth_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/auth"
)

func TestRequireToken(t *testing.T) {
	var served int
	h := auth.RequireToken([]byte("0123456789abcdef"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		assert.Empty(t, r.Header.Values("Authorization"), "the token goes no further than the check")
	}), "/healthz", "/readyz")
	for _, tc := range []struct {
		path, header string
		want         int
	}{
		{"/publish", "Bearer 0123456789abcdef", http.StatusOK},
		{"/publish", "", http.StatusUnauthorized},
		{"/publish", "Bearer 0123456789abcdeF", http.StatusUnauthorized},
		{"/publish", "Bearer 0123456789abcdef ", http.StatusUnauthorized},
		{"/publish", "0123456789abcdef", http.StatusUnauthorized},
		{"/publish", "Basic 0123456789abcdef", http.StatusUnauthorized},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/healthz/x", "", http.StatusUnauthorized},
	} {
		req := httptest.NewRequest(http.MethodPost, tc.path, nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		rec := httptest.NewRecorder()
		before := served
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.want, rec.Code, "%s %q", tc.path, tc.header)
		if tc.want == http.StatusUnauthorized {
			assert.Equal(t, before, served, "refused requests change nothing")
			assert.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
			assert.Contains(t, rec.Body.String(), "bearer token")
		}
	}
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	assert.NotNil(t, auth.RequireToken(nil, plain), "no token: the handler as it is")
}

// TestRequireTokenBesideAnIdentity: with the token in auth.TokenHeader,
// the request's Authorization (a sender's identity) is left for the
// handler, and the token is still required and taken out.
func TestRequireTokenBesideAnIdentity(t *testing.T) {
	var got []string
	h := auth.RequireToken([]byte("0123456789abcdef"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Values(auth.TokenHeader), "the token goes no further than the check")
		got = append(got, r.Header.Get("Authorization"))
	}))
	for name, c := range map[string]struct {
		token, authorization string
		want                 int
	}{
		"the token beside an identity":        {"0123456789abcdef", "Bearer identity", http.StatusOK},
		"the token alone in its header":       {"0123456789abcdef", "", http.StatusOK},
		"a wrong token beside an identity":    {"0123456789abcdeF", "Bearer identity", http.StatusUnauthorized},
		"a wrong token, the right bearer one": {"wrong", "Bearer 0123456789abcdef", http.StatusUnauthorized},
		"an empty header":                     {"", "Bearer 0123456789abcdef", http.StatusUnauthorized},
		"the token as a bearer token in it":   {"Bearer 0123456789abcdef", "Bearer identity", http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			got = nil
			req := httptest.NewRequest(http.MethodPost, "/publish", nil)
			req.Header.Set(auth.TokenHeader, c.token)
			if c.authorization != "" {
				req.Header.Set("Authorization", c.authorization)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, c.want, rec.Code, rec.Body.String())
			if c.want == http.StatusOK {
				assert.Equal(t, []string{c.authorization}, got, "the identity reaches the handler")
			} else {
				assert.Empty(t, got, "refused requests change nothing")
			}
		})
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(good, []byte("  0123456789abcdef\n"), 0o600))
	tok, err := auth.ReadToken(good)
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef", string(tok), "white space trimmed")

	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("secret\n"), 0o600))
	_, err = auth.ReadToken(short)
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	assert.Contains(t, err.Error(), "at least 16")

	_, err = auth.ReadToken(filepath.Join(dir, "missing"))
	require.Error(t, err)
}
