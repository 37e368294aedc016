package gateway_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/internal/auth"
)

// grants is an Access that allows Invoke for whole namespaces or for named
// Functions, and records what it was asked. A fake: what the test checks
// is which questions the gateway asks, and in what order (each question
// not cached is a SubjectAccessReview on the wake's path); what RBAC
// answers them is tested against a real API server in package eventbridge
// (TestGatewayCallersAsRBACAllows).
type grants struct {
	namespaces map[string]bool
	functions  map[string]bool // namespace/name
	mu         sync.Mutex
	asked      []string
}

func (g *grants) Allow(_ *http.Request, a auth.Attributes) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, a.Namespace+"/"+a.Name)
	if a.Verb != gateway.Invoke.Verb || a.Resource != gateway.Invoke.Resource || a.Subresource != gateway.Invoke.Subresource {
		return errors.New("not the invoke permission")
	}
	if g.namespaces[a.Namespace] || (a.Name != "" && g.functions[a.Namespace+"/"+a.Name]) {
		return nil
	}
	return errors.New("forbidden")
}

func (g *grants) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.asked
	g.asked = nil
	return out
}

// TestAccessIsAskedForTheNamespaceFirst: the gateway asks whether the
// caller may invoke every Function of the namespace before it asks about
// the one called, so that a caller granted the namespace is allowed by a
// decision the auth cache keeps per caller and namespace (a Function woken
// from zero then waits for no review of its own); a caller granted one
// Function only is asked about it next, and refused the others. Fails
// when the gateway asks about the Function alone, or allows on the
// namespace's refusal.
func TestAccessIsAskedForTheNamespaceFirst(t *testing.T) {
	bs := newBackends()
	be := newBackend(t)
	bs.set("shop/orders", addr(be))
	bs.set("team/orders", addr(be))
	bs.set("team/payroll", addr(be))
	access := &grants{namespaces: map[string]bool{"shop": true}, functions: map[string]bool{"team/orders": true}}
	_, srv := newGatewayWith(t, bs, nil, gateway.Config{}, gateway.WithAccess(access))
	call := func(path string) int {
		resp, err := http.Post(srv.URL+path, "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	assert.Equal(t, http.StatusOK, call("/shop/orders/"))
	assert.Equal(t, []string{"shop/"}, access.take(), "the namespace's permission alone")
	assert.Equal(t, http.StatusOK, call("/team/orders/"))
	assert.Equal(t, []string{"team/", "team/orders"}, access.take(), "the namespace's, then the Function's")
	assert.Equal(t, http.StatusForbidden, call("/team/payroll/"))
	assert.Equal(t, []string{"team/", "team/payroll"}, access.take())
	assert.Equal(t, 2, int(be.hits.Load()), "the refused call reached nothing")
}

// spent is an Access whose caller spent its share of access checks (a
// fake: what the budget is, against a real API server, is package auth's
// TestOneNamespaceCannotSpendAnothersAccessChecks).
type spent struct{ asked atomic.Int32 }

func (s *spent) Allow(*http.Request, auth.Attributes) error {
	s.asked.Add(1)
	return fmt.Errorf("%w: mallory asked for too many decisions not kept", auth.ErrTooManyChecks)
}

// TestACallerPastItsChecksIsAnswered429: a caller past its share of
// access checks is answered 429 with Retry-After, the Function's own
// permission not asked for (it would be another check), and nothing is
// reached.
func TestACallerPastItsChecksIsAnswered429(t *testing.T) {
	bs := newBackends()
	be := newBackend(t)
	bs.set("team/orders", addr(be))
	access := &spent{}
	_, srv := newGatewayWith(t, bs, nil, gateway.Config{}, gateway.WithAccess(access))
	resp, err := http.Post(srv.URL+"/team/orders/", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, int32(1), access.asked.Load(), "the namespace's permission only")
	assert.Zero(t, be.hits.Load())
}
