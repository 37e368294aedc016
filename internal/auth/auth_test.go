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
