package senders

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kfn-dev/kfn/internal/auth"
)

// ErrUnknownToken is wrapped (with auth.ErrUnauthenticated, which the
// publisher answers 401) by SenderNamespace's error for a bearer token
// that no namespace was given.
var ErrUnknownToken = errors.New("kfn dev gave no namespace this token")

// Tokens are the namespaces' tokens of one kfn dev. Safe for concurrent
// use; the zero value is not: use New.
type Tokens struct {
	mu          sync.Mutex
	byNamespace map[string]string
	namespaceOf map[string]string // token -> namespace
	written     map[string]bool   // namespaces whose token file is written
}

// New returns Tokens that gave no namespace a token yet.
func New() *Tokens {
	return &Tokens{byNamespace: map[string]string{}, namespaceOf: map[string]string{}, written: map[string]bool{}}
}

// Of returns namespace's token: 32 random bytes, hex, made at its first
// call and the same for the life of t.
func (t *Tokens) Of(namespace string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ofLocked(namespace)
}

func (t *Tokens) ofLocked(namespace string) (string, error) {
	if tok, ok := t.byNamespace[namespace]; ok {
		return tok, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a token for namespace %s: %w", namespace, err)
	}
	tok := hex.EncodeToString(b)
	t.byNamespace[namespace], t.namespaceOf[tok] = tok, namespace
	return tok, nil
}

// File returns the path of the file dir/<namespace> that holds
// namespace's token (Of), readable by the user only: the hosts'
// runtimes.EnvIdentityTokenFile. The file is written once, at the first
// call for the namespace, and read by the hosts at each event they emit.
// A namespace that is no file name (empty, ".", "..", or with a slash) is
// an error.
func (t *Tokens) File(namespace, dir string) (string, error) {
	if namespace == "" || namespace == "." || namespace == ".." || strings.ContainsAny(namespace, `/\`) {
		return "", fmt.Errorf("a token file for namespace %q: not a file name", namespace)
	}
	path := filepath.Join(dir, namespace)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written[namespace] {
		return path, nil
	}
	tok, err := t.ofLocked(namespace)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the directory of the token files: %w", err)
	}
	if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
		return "", fmt.Errorf("write the token of namespace %s: %w", namespace, err)
	}
	t.written[namespace] = true
	return path, nil
}

// SenderNamespace returns the namespace whose token r carries as its
// bearer token: "" for a request without one (the user's own publishes,
// anonymous as in a cluster), an error wrapping auth.ErrUnauthenticated
// and ErrUnknownToken for a token t gave no namespace. The token is taken
// out of r. It implements publisher.Senders.
func (t *Tokens) SenderNamespace(r *http.Request) (string, error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return "", nil
	}
	tok = strings.TrimSpace(tok)
	t.mu.Lock()
	namespace, known := t.namespaceOf[tok]
	t.mu.Unlock()
	if !known {
		return "", fmt.Errorf("%w: %w", auth.ErrUnauthenticated, ErrUnknownToken)
	}
	r.Header.Del("Authorization")
	return namespace, nil
}
