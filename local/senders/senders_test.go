package senders_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/local/senders"
)

var _ publisher.Senders = (*senders.Tokens)(nil)

func request(authorization string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://localhost/publish", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

// TestEachNamespaceIsKnownByItsToken: a namespace's token names it, the
// same token each time, written to a file only the user reads; another
// namespace's token names that one; no token is anonymous (the user's
// own publishes); a token no namespace was given, or a namespace's token
// changed by a character, is refused as unauthenticated (401), never
// taken for a namespace.
func TestEachNamespaceIsKnownByItsToken(t *testing.T) {
	tokens := senders.New()
	a, err := tokens.Of("team-a")
	require.NoError(t, err)
	again, err := tokens.Of("team-a")
	require.NoError(t, err)
	assert.Equal(t, a, again)
	b, err := tokens.Of("team-b")
	require.NoError(t, err)
	assert.NotEqual(t, a, b)

	dir := filepath.Join(t.TempDir(), "identity")
	path, err := tokens.File("team-b", dir)
	require.NoError(t, err)
	content, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, b, string(content))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.NoError(t, os.WriteFile(path, []byte("changed"), 0o600))
	again, err = tokens.File("team-b", dir)
	require.NoError(t, err)
	assert.Equal(t, path, again)
	content, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "changed", string(content), "written once, not at each call")
	for _, bad := range []string{"", ".", "..", "a/b", "../etc"} {
		_, err := tokens.File(bad, dir)
		assert.Error(t, err, bad)
	}

	for _, c := range []struct{ authorization, want string }{
		{"Bearer " + a, "team-a"},
		{"bearer " + b, "team-b"},
		{"", ""},
		{"Basic " + a, ""},
	} {
		r := request(c.authorization)
		got, err := tokens.SenderNamespace(r)
		require.NoError(t, err, c.authorization)
		assert.Equal(t, c.want, got, c.authorization)
		if c.want != "" {
			assert.Empty(t, r.Header.Get("Authorization"), "the token is taken out")
		}
	}
	flipped := []byte(a)
	flipped[0] ^= 1
	for _, tok := range []string{"made-up", string(flipped), a + b} {
		_, err := tokens.SenderNamespace(request("Bearer " + tok))
		assert.ErrorIs(t, err, auth.ErrUnauthenticated, tok)
		assert.ErrorIs(t, err, senders.ErrUnknownToken, tok)
		assert.Equal(t, http.StatusUnauthorized, auth.Status(err))
	}
}
