package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAPortForwardThatDoesNotOpenHoldsNoOne: the API server takes kfn
// view's requests and never answers (a fake: no real API server hangs on
// demand). A request that opens the port-forward with a context that
// never ends (a page's replay, whose browser does not give up) holds no
// other: a read of the page's state gives up with its own context, where
// it waited for the lock for as long as the first one waited.
func TestAPortForwardThatDoesNotOpenHoldsNoOne(t *testing.T) {
	asked := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	cfg := &rest.Config{Host: srv.URL}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	v := newClusterView(&cluster{rest: cfg, cs: cs, kfnNamespace: "kfn", where: "the test's cluster"}, "default", "")
	v.openWait = time.Second

	first := make(chan error, 1)
	go func() {
		_, err := v.send(context.Background(), http.MethodPost, "/deadletters/1/replay")
		first <- err
	}()
	<-asked // the first request is opening the port-forward
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := v.send(ctx, http.MethodGet, "/deadletters")
		second <- err
	}()
	select {
	case err := <-second:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("the second request still waits for the first after 5s")
	}
	select {
	case err := <-first:
		require.ErrorIs(t, err, context.DeadlineExceeded, "the opening is bounded by openWait")
	case <-time.After(10 * time.Second):
		t.Fatal("the first request still opens the port-forward")
	}
}
