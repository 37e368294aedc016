package eventpath_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/internal/auth"
)

// onlyNamespace stands in for the cluster's SubjectAccessReview (tested
// with a real API server in package eventbridge's TestRunInACluster): it
// lets read the paths of one namespace.
type onlyNamespace string

func (o onlyNamespace) Allow(_ *http.Request, a auth.Attributes) error {
	if a.Namespace != string(o) || a.Verb != "get" || a.Subresource != "events" {
		return fmt.Errorf("%w: may not %s subscriptions/%s in namespace %s", auth.ErrForbidden, a.Verb, a.Subresource, a.Namespace)
	}
	return nil
}

// TestTheHandlerListsAndFindsWithinItsBounds: the recent chains of a
// namespace (at most the limit asked, within MaxRecent), one event's
// chains, each only to a caller allowed the namespace; a request without
// a namespace, or with a limit out of bounds, changes nothing and says
// why.
func TestTheHandlerListsAndFindsWithinItsBounds(t *testing.T) {
	n, err := eventpath.NewNamespaces(10, 0)
	require.NoError(t, err)
	for i := range 3 {
		n.Observe(step("team-a", "audit", uint64(i+1), fmt.Sprintf("order-%d", i+1)))
	}
	srv := httptest.NewServer(eventpath.Handler(n, n.Bound(), onlyNamespace("team-a"), eventpath.Limits{}))
	t.Cleanup(srv.Close)
	get := func(path string) (int, eventpath.Found, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var raw json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
		var f eventpath.Found
		_ = json.Unmarshal(raw, &f)
		return resp.StatusCode, f, string(raw)
	}
	code, f, _ := get("/events?namespace=team-a")
	require.Equal(t, http.StatusOK, code)
	assert.Len(t, f.Chains, 3, "each event without trace context is a chain of its own")
	assert.Equal(t, "team-a", f.Namespace)
	code, f, _ = get("/events?namespace=team-a&limit=1")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, f.Chains, 1)
	code, f, _ = get("/events?namespace=team-a&limit=100")
	require.Equal(t, http.StatusOK, code, "the most a listing answers")
	assert.Len(t, f.Chains, 3)
	code, _, body := get("/events/order-2?namespace=team-a&source=elsewhere")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `no event \"order-2\" of source \"elsewhere\" in namespace team-a among the 10 most recent`)
	code, f, _ = get("/events/order-2?namespace=team-a")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, f.Chains, 1)
	assert.Equal(t, "order-2", f.Chains[0].Events[0].ID)

	for path, want := range map[string]int{
		"/events":                               http.StatusBadRequest,
		"/events?namespace=team-a&limit=0":      http.StatusBadRequest,
		"/events?namespace=team-a&limit=101":    http.StatusBadRequest,
		"/events?namespace=team-a&limit=x":      http.StatusBadRequest,
		"/events?namespace=team-b":              http.StatusForbidden,
		"/events/order-1?namespace=team-b":      http.StatusForbidden,
		"/events/never?namespace=team-a":        http.StatusNotFound,
		"/events/order-1?namespace=" + long(64): http.StatusBadRequest,
	} {
		code, _, body := get(path)
		assert.Equal(t, want, code, "%s: %s", path, body)
		assert.Contains(t, body, `"error"`, path)
	}
}

func long(n int) string { return strings.Repeat("a", n) }

// heldReader holds the reads of the namespaces in hold until release is
// closed, telling each on entered; it answers the others at once.
type heldReader struct {
	hold    map[string]bool
	entered chan string
	release chan struct{}
}

func (h heldReader) wait(namespace string) {
	if h.hold[namespace] {
		h.entered <- namespace
		<-h.release
	}
}

func (h heldReader) Find(_ context.Context, namespace, id, _ string) []eventpath.Chain {
	h.wait(namespace)
	return []eventpath.Chain{{Events: []*eventpath.Event{{ID: id}}}}
}

func (h heldReader) Recent(_ context.Context, namespace string, _ int) []eventpath.Chain {
	h.wait(namespace)
	return nil
}

// TestOneNamespacesReadsWaitForThemselves: a namespace whose reads are at
// their bound (each asks every replica) gets 429 with Retry-After past
// it, and another namespace's read is answered meanwhile; the bound in
// all holds too.
func TestOneNamespacesReadsWaitForThemselves(t *testing.T) {
	h := heldReader{hold: map[string]bool{"flood": true, "c1": true}, entered: make(chan string, 8), release: make(chan struct{})}
	srv := httptest.NewServer(eventpath.Handler(h, 10, nil, eventpath.Limits{PerNamespace: 2, Total: 3, Wait: 100 * time.Millisecond}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Timeout: 10 * time.Second} // a read that is never let through fails, not hangs
	get := func(path string) *http.Response {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err) // on the holding goroutines too
			return &http.Response{Header: http.Header{}}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	held := make(chan int, 3)
	hold := func(path string) {
		go func() { held <- get(path).StatusCode }()
		<-h.entered
	}
	hold("/events?namespace=flood")
	hold("/events/x?namespace=flood")
	resp := get("/events?namespace=flood")
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "past its namespace's bound")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, http.StatusOK, get("/events?namespace=team-a").StatusCode, "another namespace's read, meanwhile")
	hold("/events?namespace=c1")
	assert.Equal(t, http.StatusTooManyRequests, get("/events/x?namespace=team-a").StatusCode, "past the bound in all")
	close(h.release)
	for range 3 {
		assert.Equal(t, http.StatusOK, <-held)
	}
	h.hold["flood"] = false // read by the handler's goroutines only, all ended above
	assert.Equal(t, http.StatusOK, get("/events?namespace=flood").StatusCode, "its turn again")
	assert.Equal(t, http.StatusOK, get("/events/x?namespace=team-a").StatusCode)
}

// TestTheDefaultLimits: zero Limits are 2 reads a namespace and 8 in all.
func TestTheDefaultLimits(t *testing.T) {
	hold := map[string]bool{}
	for i := range 4 {
		hold[fmt.Sprintf("ns-%d", i)] = true
	}
	h := heldReader{hold: hold, entered: make(chan string, 8), release: make(chan struct{})}
	srv := httptest.NewServer(eventpath.Handler(h, 10, nil, eventpath.Limits{}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(h.release) }) // before the server's Close, which waits for the reads
	code := func(path string) int {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(srv.URL + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 4 {
		for range 2 {
			go code(fmt.Sprintf("/events?namespace=ns-%d", i))
			<-h.entered
		}
	}
	assert.Equal(t, http.StatusTooManyRequests, code("/events?namespace=ns-0"), "a third read of a namespace")
	assert.Equal(t, http.StatusTooManyRequests, code("/events?namespace=ns-9"), "a ninth read in all")
}
