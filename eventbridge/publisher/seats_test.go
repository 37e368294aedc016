package publisher_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/metrictest"
	"github.com/kfn-dev/kfn/test/natstest"
)

// heldStore is a real event store whose Put records the order of the
// events it is given, and holds those whose id starts with "hold-" until
// release, whatever their context: a NATS that is slow to answer some
// publishes. It is how the
// test sees which request had a seat next; no real part can hold a
// chosen store on cue.
type heldStore struct {
	inner   publisher.EventStore
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	order []string
}

func (s *heldStore) Put(ctx context.Context, e eventstore.Event) (eventstore.Result, error) {
	id := e.Attribute("id")
	s.mu.Lock()
	s.order = append(s.order, id)
	s.mu.Unlock()
	if strings.HasPrefix(id, "hold-") {
		<-s.release // past the store timeout too: a NATS that does not answer
		return s.inner.Put(context.Background(), e)
	}
	return s.inner.Put(ctx, e)
}

// open lets the held stores go on, and every store after.
func (s *heldStore) open() { s.once.Do(func() { close(s.release) }) }

func (s *heldStore) stored() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// seatsEnv is a publisher over a heldStore, its senders the namespaces of
// tokens "a" and "b".
func seatsEnv(t *testing.T, cfg publisher.Config) (*heldStore, string, *prometheus.Registry) {
	t.Helper()
	js := natstest.Start(t).JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(context.Background(), js, sc))
	store := &heldStore{inner: eventstore.New(js, sc.EventStream), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	p, err := publisher.New(store, cfg, publisher.WithSenders(tokens{"a": "team-a", "b": "team-b"}), publisher.WithMetrics(reg))
	require.NoError(t, err)
	srv := newServer(t, p)
	t.Cleanup(store.open) // before the server closes, which waits for its requests
	return store, srv, reg
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.MaxHeaderBytes = publisher.MaxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// publishAs publishes one event with id as the sender of token (none
// when empty), on a goroutine; the channel gets the status.
func publishAs(t *testing.T, url, token, id string) <-chan int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/publish", strings.NewReader("{}"))
	require.NoError(t, err)
	for k, v := range binary(id, "order.created.v1") {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	code := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			code <- 0
			return
		}
		resp.Body.Close()
		code <- resp.StatusCode
	}()
	return code
}

// TestANamespacesBurstWaitsBehindItself: one namespace's publish holds its
// one turn (its store does not answer) and three more of its wait, in
// order; another namespace's publish, and one without a namespace, are
// stored at once meanwhile; then the three are stored in the order they
// came, one at a time. (One turn, so that the order of the stores is
// the order of the turns: with two, two stores run at once. The seats of
// more turns are internal/seats's tests.)
func TestANamespacesBurstWaitsBehindItself(t *testing.T) {
	store, url, reg := seatsEnv(t, publisher.Config{PublishingPerNamespace: 1, StoreTimeout: time.Minute})
	answers := []<-chan int{publishAs(t, url, "a", "hold-a-1")}
	require.Eventually(t, func() bool { return len(store.stored()) == 1 }, 5*time.Second, time.Millisecond, "the turn held")
	for i, id := range []string{"a-2", "a-3", "a-4"} {
		answers = append(answers, publishAs(t, url, "a", id))
		require.Eventually(t, func() bool {
			return metrictest.Gauge(t, reg, "kfn_eventbridge_publish_namespaced_waiting") == float64(i+1)
		},
			5*time.Second, time.Millisecond, "%s waits for its turn (in this order)", id)
	}
	assert.Equal(t, 1.0, metrictest.Gauge(t, reg, "kfn_eventbridge_publish_namespaced_in_progress"))

	assert.Equal(t, http.StatusNoContent, <-publishAs(t, url, "b", "b-1"), "team-b waits for none of team-a's")
	assert.Equal(t, http.StatusNoContent, <-publishAs(t, url, "", "anonymous"), "nor does a publish without a namespace")
	assert.Equal(t, []string{"hold-a-1", "b-1", "anonymous"}, store.stored())

	store.open() // the held store answers
	for _, a := range answers {
		assert.Equal(t, http.StatusNoContent, <-a)
	}
	order := store.stored()
	require.Len(t, order, 6)
	assert.Equal(t, []string{"a-2", "a-3", "a-4"}, order[3:], "team-a's waited in the order they came")
	assert.Zero(t, metrictest.Gauge(t, reg, "kfn_eventbridge_publish_namespaced_in_progress"))
	assert.Zero(t, metrictest.Gauge(t, reg, "kfn_eventbridge_publish_namespaced_waiting"))
}

// TestNoTurnWithinTheStoreTimeoutIsBusy: a publish that waits a store
// timeout for its turn is answered 503 with Retry-After and stores
// nothing, on both endpoints; another namespace's publish is stored.
func TestNoTurnWithinTheStoreTimeoutIsBusy(t *testing.T) {
	store, url, reg := seatsEnv(t, publisher.Config{PublishingPerNamespace: 1, StoreTimeout: 200 * time.Millisecond})
	held := publishAs(t, url, "a", "hold-1")
	require.Eventually(t, func() bool { return len(store.stored()) == 1 }, 5*time.Second, time.Millisecond)

	req, err := http.NewRequest(http.MethodPost, url+"/publish", strings.NewReader("{}"))
	require.NoError(t, err)
	for k, v := range binary("late", "order.created.v1") {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer a")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body := readAll(t, resp)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, body, "the publisher is busy: namespace team-a works on 1 publishes at once, its most")

	req, err = http.NewRequest(http.MethodPost, url+"/shop/v1/events", strings.NewReader(`{"event-type":"order.created","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer a")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body = readAll(t, resp)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.Contains(t, body, "the publisher is busy")

	assert.Equal(t, http.StatusNoContent, <-publishAs(t, url, "b", "other"))
	assert.Equal(t, []string{"hold-1", "other"}, store.stored(), "nothing of team-a's stored past its turn")
	assert.Zero(t, metrictest.Gauge(t, reg, "kfn_eventbridge_publish_namespaced_waiting"), "the waits given up left nothing behind")
	store.open()
	assert.Equal(t, http.StatusNoContent, <-held)
}
