package deadletter_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// grants is an Access that allows what it lists, as "verb namespace", and
// records what it was asked. It stands for auth.Kubernetes, whose answers
// come from RBAC (its own test runs it against a real API server): here
// the question is which permission each route asks, of which namespace,
// before it does anything.
type grants struct {
	mu    sync.Mutex
	allow map[string]bool
	asked []string
}

func (g *grants) Allow(_ *http.Request, a auth.Attributes) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := a.Verb + " " + a.Namespace
	g.asked = append(g.asked, q)
	if a.Group != "eventing.kyma-project.io" || a.Resource != "subscriptions" || a.Subresource != "deadletters" || !g.allow[q] {
		return fmt.Errorf("%w: may not %s", auth.ErrForbidden, a)
	}
	return nil
}

// TestEveryRouteAsksBeforeItActs: each route of the admin API asks Access
// for its verb on the dead letters of the namespace it touches (the
// letter's own, for one letter; every namespace for a listing without
// one), answers 403 and changes nothing when refused, and acts when
// allowed.
func TestEveryRouteAsksBeforeItActs(t *testing.T) {
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	g := &grants{allow: map[string]bool{}}
	a, err := deadletter.NewAdmin(js, sc, deadletter.WithAccess(g))
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	e := &env{js: js, streams: sc, admin: a, srv: srv}
	e.bury(t, "team-a", "orders", "a1", 1)
	e.bury(t, "team-b", "orders", "b1", 2)
	e.consumer(t, "team-a", "orders")
	letters, err := a.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, letters, 2)
	seqA := letters[0].Sequence

	for _, c := range []struct {
		method, path, asked string
	}{
		{http.MethodGet, "/deadletters?namespace=team-a", "list team-a"},
		{http.MethodGet, "/deadletters", "list "},
		{http.MethodGet, fmt.Sprintf("/deadletters/%d", seqA), "get team-a"},
		{http.MethodPost, fmt.Sprintf("/deadletters/%d/replay", seqA), "update team-a"},
		{http.MethodPost, "/deadletters/replay?namespace=team-a&subscription=orders", "update team-a"},
		{http.MethodDelete, fmt.Sprintf("/deadletters/%d", seqA), "delete team-a"},
		{http.MethodGet, "/_kfn/deadletters?namespace=team-a", "list team-a"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			g.mu.Lock()
			g.asked, g.allow = nil, map[string]bool{}
			g.mu.Unlock()
			code, body := e.do(t, c.method, c.path)
			assert.Equal(t, http.StatusForbidden, code, body)
			assert.Contains(t, body, "may not "+strings.Fields(c.asked)[0])
			assert.Contains(t, g.asked, c.asked)
			left, err := a.List(context.Background(), deadletter.Filter{})
			require.NoError(t, err)
			assert.Len(t, left, 2, "nothing replayed or deleted")
		})
	}

	// Allowed, in the order that leaves something to act on.
	for _, c := range []struct {
		method, path, grant string
		code                int
	}{
		{http.MethodGet, "/deadletters?namespace=team-a", "list team-a", http.StatusOK},
		{http.MethodGet, fmt.Sprintf("/deadletters/%d", seqA), "get team-a", http.StatusOK},
		{http.MethodDelete, fmt.Sprintf("/deadletters/%d", seqA), "delete team-a", http.StatusNoContent},
	} {
		g.mu.Lock()
		g.allow = map[string]bool{c.grant: true}
		g.mu.Unlock()
		code, body := e.do(t, c.method, c.path)
		assert.Equal(t, c.code, code, "%s %s: %s", c.method, c.path, body)
	}
	left, err := a.List(context.Background(), deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, "team-b", left[0].Namespace, "team-b's letter is untouched")
}
