package depcachetest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/kfn-dev/kfn/runtimes"
)

// Token is the bearer token the stand-in requires: a pod's identity token.
const Token = "a-pod-identity-token"

// WriterToken is the writer token the stand-in requires with a PUT of
// runtime and hash (header runtimes.DependencyWriterHeader): it stands for
// the install container's token of the audience
// runtimes.DependencyWriterAudience(runtime, hash).
func WriterToken(runtime, hash string) string { return "writer-of-" + runtime + "-" + hash }

// StandIn answers GET, HEAD and PUT of /_kfn/dependencies/<runtime>/<hash>
// with Token required (401 otherwise) and, for a PUT, WriterToken too (403
// otherwise), first write wins (201, then 200),
// 404 for what it does not hold, 400 for another path; and, when a test
// forces it, that status to every request, or to the next few. Its
// methods are safe for concurrent use.
type StandIn struct {
	*httptest.Server

	mu       sync.Mutex
	objects  map[string][]byte
	forced   int
	failNext int
	failWith int
	requests int
}

var path = regexp.MustCompile(`^/_kfn/dependencies/([a-z][a-z0-9]*)/([0-9a-f]{64})$`)

// Start serves a stand-in until the test ends.
func Start(t testing.TB) *StandIn {
	t.Helper()
	c := &StandIn{objects: map[string][]byte{}}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *StandIn) serve(w http.ResponseWriter, r *http.Request) {
	m := path.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+Token {
		http.Error(w, "no identity", http.StatusUnauthorized)
		return
	}
	key := m[1] + "/" + m[2]
	c.mu.Lock()
	c.requests++
	forced := c.forced
	if forced == 0 && c.failNext > 0 {
		c.failNext--
		forced = c.failWith
	}
	c.mu.Unlock()
	if forced != 0 {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "forced", forced)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		b := c.Object(m[1], m[2])
		if b == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	case http.MethodPut:
		if r.Header.Get(runtimes.DependencyWriterHeader) != WriterToken(m[1], m[2]) {
			http.Error(w, "forbidden: not the install step of these dependencies", http.StatusForbidden)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.objects[key]; ok {
			w.WriteHeader(http.StatusOK)
			return
		}
		c.objects[key] = b
		w.WriteHeader(http.StatusCreated)
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

// Base is the address pods are given (KFN_DEPENDENCY_CACHE).
func (c *StandIn) Base() string { return c.URL + "/_kfn/dependencies" }

// Object is what is stored for runtime and hash (nil: nothing).
func (c *StandIn) Object(runtime, hash string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objects[runtime+"/"+hash]
}

// Put stores b for runtime and hash, over what was there.
func (c *StandIn) Put(runtime, hash string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects[runtime+"/"+hash] = b
}

// FailNext answers the next n requests (with the token, to a valid path)
// with status, and a Retry-After of 0.
func (c *StandIn) FailNext(n, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext, c.failWith = n, status
}

// Requests is how many requests with the token, to a valid path, it had.
func (c *StandIn) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Force answers every request with status from now on; 0 stops it.
func (c *StandIn) Force(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forced = status
}
