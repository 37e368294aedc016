package eventbridge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/test/natstest"
)

// bridgeOn builds an event bridge of components on a new connection to a
// new NATS server with kfn's streams, in a static world delivering every
// sink to sinkURL.
func bridgeOn(t *testing.T, cfg eventbridge.Config, sinkURL string, opts ...eventbridge.Option) (*eventbridge.Bridge, *eventbridge.Static, *nats.Conn) {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, jsstream.Ensure(context.Background(), js, cfg.Streams))
	static := &eventbridge.Static{Resolver: dispatcher.ResolverFunc(func(v1alpha2.Sink) (string, error) { return sinkURL, nil })}
	b, err := eventbridge.New(cfg, nc, static, opts...)
	require.NoError(t, err)
	return b, static, nc
}

// publishTo posts one binary CloudEvent of type order.created.v1 to h with
// authorization (none when empty) and returns the status.
func publishTo(t *testing.T, h http.Handler, id, authorization string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/publish", strings.NewReader(`{"id":"`+id+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", id)
	req.Header.Set("Ce-Source", "shop")
	req.Header.Set("Ce-Type", "order.created.v1")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestBridgeWithoutKubernetesDeliversWhatItIsGiven builds the publisher and
// the dispatcher with New, as kfn dev and the benchmarks do: the
// Subscriptions applied to Bridge.Subscriptions get their consumers and
// their events, published through Handlers, are delivered; the parts left
// out of Config are nil, so are their handlers; every part's metrics are
// registered; and Run ends, with natsconn.ErrLost, once the connection is
// closed for good.
func TestBridgeWithoutKubernetesDeliversWhatItIsGiven(t *testing.T) {
	var got atomic.Value
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Ce-Id"))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	cfg := eventbridge.DefaultConfig()
	cfg.Components = []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}
	cfg.Dispatcher.Egress.AllowLoopback = true
	cfg.Admin = false
	reg := prometheus.NewRegistry()
	b, static, nc := bridgeOn(t, cfg, sink.URL, eventbridge.WithMetrics(reg))
	assert.NotNil(t, b.Publisher)
	assert.NotNil(t, b.Dispatcher)
	assert.Nil(t, b.Gateway, "not in Config.Components")
	assert.Nil(t, b.DeadLetters, "Config.Admin false")
	h := b.Handlers()
	assert.Nil(t, h.Gateway)
	assert.Nil(t, h.DeadLetters)

	sub := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec:       v1alpha2.SubscriptionSpec{Sink: "http://orders.shop.svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
	}
	require.Empty(t, static.Apply(context.Background(), []*v1alpha2.Subscription{sub}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- b.Run(ctx) }()

	require.Equal(t, http.StatusNoContent, publishTo(t, h.Publisher, "e1", ""))
	require.Eventually(t, func() bool { return got.Load() == "e1" }, 10*time.Second, 10*time.Millisecond, "delivered to the sink")

	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	assert.True(t, names["kfn_eventbridge_publish_requests_total"], "the publisher's metrics: %v", names)
	assert.True(t, names["kfn_eventbridge_delivered_total"], "the dispatcher's metrics: %v", names)
	assert.True(t, names["kfn_eventbridge_backlog"], "the backlog collector: %v", names)

	nc.Close()
	select {
	case err := <-ran:
		require.True(t, errors.Is(err, natsconn.ErrLost), "Run ends with ErrLost, not %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after the connection closed")
	}
}

// TestBridgeHandlersRequireTheToken: with WithToken, the publisher's
// handler refuses a request without the token, and takes one with it;
// its probes need none.
func TestBridgeHandlersRequireTheToken(t *testing.T) {
	cfg := eventbridge.DefaultConfig()
	cfg.Components = []string{eventbridge.ComponentPublisher}
	b, _, _ := bridgeOn(t, cfg, "http://127.0.0.1:1", eventbridge.WithToken([]byte("a-long-enough-token")))
	h := b.Handlers()
	assert.Equal(t, http.StatusUnauthorized, publishTo(t, h.Publisher, "e1", ""))
	assert.Equal(t, http.StatusUnauthorized, publishTo(t, h.Publisher, "e1", "Bearer not-the-right-token"))
	assert.Equal(t, http.StatusNoContent, publishTo(t, h.Publisher, "e1", "Bearer a-long-enough-token"))
	rec := httptest.NewRecorder()
	h.Publisher.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NotNil(t, h.DeadLetters, "DefaultConfig's Admin")
}

// TestNewRefusesWhatCannotWork: New says what is missing and builds
// nothing.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	for name, c := range map[string]struct {
		cfg  func(*eventbridge.Config)
		nc   *nats.Conn
		env  eventbridge.Environment
		want string
	}{
		"no connection":             {env: &eventbridge.Static{}, want: "a NATS connection is required"},
		"no environment":            {nc: nc, want: "an Environment is required"},
		"gateway without backends":  {cfg: func(c *eventbridge.Config) { c.Components = []string{eventbridge.ComponentGateway} }, nc: nc, env: &eventbridge.Static{}, want: "gateway: no backends"},
		"no component":              {cfg: func(c *eventbridge.Config) { c.Components = nil }, nc: nc, env: &eventbridge.Static{}, want: "no component"},
		"unknown component":         {cfg: func(c *eventbridge.Config) { c.Components = []string{"broker"} }, nc: nc, env: &eventbridge.Static{}, want: `unknown component "broker"`},
		"ack wait under one second": {cfg: func(c *eventbridge.Config) { c.AckWait = time.Millisecond }, nc: nc, env: &eventbridge.Static{}, want: "-ack-wait"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := eventbridge.DefaultConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			b, err := eventbridge.New(cfg, c.nc, c.env)
			require.ErrorContains(t, err, c.want)
			assert.Nil(t, b)
		})
	}
}
