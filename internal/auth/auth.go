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

// TokenHeader carries the shared bearer token (RequireToken) when the
// request's Authorization carries an identity (a Function's host sends its
// pod's ServiceAccount token there): both are then checked, so that
// setting the shared token does not turn sender identity off.
const TokenHeader = "Kfn-Publisher-Token"

// RequireToken wraps h so that only requests with the token reach it: in
// TokenHeader when the request has one (its Authorization is then left
// for h: a sender's identity), else as the bearer token of its
// Authorization (a producer outside Kubernetes). The paths in open (exact
// matches, such as "/healthz") are served without one. Others get 401
// with a WWW-Authenticate challenge. The token is taken out of the request
// h gets, so that it goes no further (the gateway's Functions never see
// it). A nil or empty token returns h unchanged.
func RequireToken(token []byte, h http.Handler, open ...string) http.Handler {
	if len(token) == 0 {
		return h
	}
	bearer := append([]byte("Bearer "), token...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range open {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		header, want := "Authorization", bearer
		if _, ok := r.Header[TokenHeader]; ok {
			header, want = TokenHeader, token
		}
		got := r.Header.Values(header)
		if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kfn"`)
			http.Error(w, "missing or wrong bearer token: send Authorization: Bearer <token>, or "+TokenHeader+": <token> beside a ServiceAccount token in Authorization", http.StatusUnauthorized)
			return
		}
		r.Header.Del(header)
		h.ServeHTTP(w, r)
	})
}
