package auth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// minTokenLength is the shortest token accepted: shorter ones are guessable.
const minTokenLength = 16

// ErrInvalidToken is wrapped by ReadToken's errors about the token itself.
var ErrInvalidToken = errors.New("invalid token")

// ReadToken reads a token from a file (a mounted Secret key), trimming
// surrounding white space. It refuses an empty token or one shorter than
// 16 characters.
func ReadToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenLength {
		return nil, fmt.Errorf("%w: %s holds %d characters, want at least %d", ErrInvalidToken, path, len(token), minTokenLength)
	}
	return []byte(token), nil
}

// RequireToken wraps h so that only requests with the bearer token reach
// it; the paths in open (exact matches, such as "/healthz") are served
// without one. Others get 401 with a WWW-Authenticate challenge. The token
// is taken out of the request h gets, so that it goes no further (the
// gateway's Functions never see it). A nil or empty token returns h
// unchanged.
func RequireToken(token []byte, h http.Handler, open ...string) http.Handler {
	if len(token) == 0 {
		return h
	}
	want := append([]byte("Bearer "), token...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range open {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kfn"`)
			http.Error(w, "missing or wrong bearer token: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization")
		h.ServeHTTP(w, r)
	})
}
