package publisher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/logtest"
	"github.com/kfn-dev/kfn/test/natstest"
)

// env is a publisher over a real JetStream, with a probe consumer that sees
// every stored event (the event stream keeps events only while a consumer
// is interested).
type env struct {
	nats  *natstest.Server
	js    jetstream.JetStream
	srv   *httptest.Server
	probe jetstream.Consumer
	reg   *prometheus.Registry
}

func newEnv(t *testing.T, cfg publisher.Config, modify func(*stream.Config), opts ...publisher.Option) *env {
	t.Helper()
	ns := natstest.Start(t)
	js := ns.JetStream()
	sc := stream.DefaultConfig()
	sc.Storage = stream.StorageMemory
	if modify != nil {
		modify(&sc)
	}
	ctx := context.Background()
	require.NoError(t, jsstream.Ensure(ctx, js, sc))
	probe, err := js.CreateOrUpdateConsumer(ctx, sc.EventStream, jetstream.ConsumerConfig{Durable: "probe", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	p, err := publisher.New(eventstore.New(js, sc.EventStream), cfg, append([]publisher.Option{publisher.WithMetrics(reg)}, opts...)...)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(p)
	srv.Config.MaxHeaderBytes = publisher.MaxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{nats: ns, js: js, srv: srv, probe: probe, reg: reg}
}

type stored struct {
	Subject string
	Header  map[string][]string
	Data    string
}

// stored returns the events stored so far, waiting briefly for n of them.
func (e *env) stored(t *testing.T, n int) []stored {
	t.Helper()
	var out []stored
	if n == 0 {
		info, err := e.probe.Info(context.Background())
		require.NoError(t, err)
		require.Zero(t, info.NumPending, "nothing stored")
		return nil
	}
	batch, err := e.probe.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		out = append(out, stored{Subject: m.Subject(), Header: m.Headers(), Data: string(m.Data())})
	}
	require.Len(t, out, n)
	info, err := e.probe.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.NumPending, "no more than %d stored", n)
	return out
}

func (e *env) post(t *testing.T, path string, header map[string]string, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func binary(id, typ string) map[string]string {
	return map[string]string{
		"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": "shop", "Ce-Type": typ,
		"Content-Type": "application/json",
	}
}

func TestPublishBinary(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	h := binary("e1", "order.created.v1")
	h["Ce-Myext"] = "x"
	h["Ce-Time"] = "2026-01-02T03:04:05Z"
	h["Traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	code, body, _ := e.post(t, "/publish", h, `{"n":1}`)
	require.Equal(t, http.StatusNoContent, code, body)

	got := e.stored(t, 1)[0]
	assert.Equal(t, "kyma.shop.order.created.v1", got.Subject)
	assert.Equal(t, `{"n":1}`, got.Data)
	assert.Equal(t, []string{"e1"}, got.Header["ce-id"])
	assert.Equal(t, []string{"x"}, got.Header["ce-myext"])
	assert.Equal(t, []string{"2026-01-02T03:04:05Z"}, got.Header["ce-time"])
	assert.Equal(t, []string{"application/json"}, got.Header["Content-Type"])
	assert.Equal(t, []string{h["Traceparent"]}, got.Header["traceparent"])
	assert.Equal(t, []string{eventstore.MsgID("", "shop", "e1")}, got.Header["Nats-Msg-Id"])
	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP kfn_eventbridge_publish_requests_total Publish requests by endpoint (publish, v2, v1, subscribed) and HTTP status code.
# TYPE kfn_eventbridge_publish_requests_total counter
kfn_eventbridge_publish_requests_total{code="204",endpoint="publish"} 1
`), "kfn_eventbridge_publish_requests_total"))
}

func TestPublishStructuredAndV2(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	ce := `{"specversion":"1.0","id":"s1","source":"/shop/eu","type":"order.paid.v1","datacontenttype":"application/json","data":{"total":3}}`
	code, body, _ := e.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents+json"}, ce)
	require.Equal(t, http.StatusNoContent, code, body)
	code, body, _ = e.post(t, "/commerce/v2/events", map[string]string{"Content-Type": "application/cloudevents+json"}, strings.Replace(ce, `"s1"`, `"s2"`, 1))
	require.Equal(t, http.StatusNoContent, code, body)

	got := e.stored(t, 2)
	for _, g := range got {
		assert.Equal(t, "kyma.shopeu.order.paid.v1", g.Subject, "source cleaned into the subject")
		assert.JSONEq(t, `{"total":3}`, g.Data)
		assert.Equal(t, []string{"/shop/eu"}, g.Header["ce-source"])
	}
}

func TestPublishBatch(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	batch := `[{"specversion":"1.0","id":"b1","source":"shop","type":"order.created.v1","data":"one"},
	           {"specversion":"1.0","id":"b2","source":"shop","type":"order.paid.v1","data":"two"}]`
	code, body, _ := e.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents-batch+json"}, batch)
	require.Equal(t, http.StatusNoContent, code, body)
	got := e.stored(t, 2)
	assert.Equal(t, "kyma.shop.order.created.v1", got[0].Subject)
	assert.Equal(t, "kyma.shop.order.paid.v1", got[1].Subject)

	// One bad event refuses the whole batch before anything is stored.
	bad := `[{"specversion":"1.0","id":"b3","source":"shop","type":"order.created.v1"},{"specversion":"1.0","source":"shop","type":"x.y"}]`
	code, body, _ = e.post(t, "/publish", map[string]string{"Content-Type": "application/cloudevents-batch+json"}, bad)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "event 1 of the batch")
	assert.Contains(t, body, "id")
	e.stored(t, 0)
}

func TestPublishInvalid(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	tests := map[string]struct {
		header   map[string]string
		body     string
		wantBody string
		// exact: the body is wantBody, byte for byte, as text/plain.
		exact bool
	}{
		// Kyma's publisher (eventing-publisher-proxy pkg/handler/handler.go
		// publishCloudEvents) answers sdk-go's and its builder's and
		// cleaner's messages as they are: a client that matches them reads
		// the same bytes.
		"not a cloudevent":   {header: map[string]string{"Content-Type": "application/json"}, body: `{}`, wantBody: "unknown Message encoding", exact: true},
		"missing id":         {header: map[string]string{"Ce-Specversion": "1.0", "Ce-Source": "s", "Ce-Type": "a.b"}, wantBody: "id: MUST be a non-empty string\n", exact: true},
		"missing type":       {header: map[string]string{"Ce-Specversion": "1.0", "Ce-Source": "s", "Ce-Id": "1"}, wantBody: "type: MUST be a non-empty string\n", exact: true},
		"unknown version":    {header: map[string]string{"Ce-Specversion": "9.9", "Ce-Source": "s", "Ce-Id": "1", "Ce-Type": "a.b"}, wantBody: "unknown Message encoding", exact: true},
		"bad structured":     {header: map[string]string{"Content-Type": "application/cloudevents+json"}, body: `{"specversion":`, wantBody: "unexpected end of JSON input", exact: true},
		"empty type segment": {header: binary("1", "order..v1"), wantBody: "event type cannot have empty segments after cleaning: kyma.shop.order..v1", exact: true},
		"type cleans away":   {header: binary("1", "*"), wantBody: "event type cannot have empty segments after cleaning: kyma.shop.", exact: true},
		"legacy type short":  {header: binary("1", "sap.kyma.custom.app.v1"), wantBody: "failed to parse event-type=sap.kyma.custom.app.v1 with prefix=sap.kyma.custom: invalid format", exact: true},
		"control character": {
			header:   map[string]string{"Content-Type": "application/cloudevents+json"},
			body:     `{"specversion":"1.0","id":"1","source":"s","type":"a.b","subject":"x\ny"}`,
			wantBody: "attribute subject contains a control character",
		},
		"empty batch": {header: map[string]string{"Content-Type": "application/cloudevents-batch+json"}, body: `[]`, wantBody: "no events"},
		"bad batch":   {header: map[string]string{"Content-Type": "application/cloudevents-batch+json"}, body: `{`, wantBody: "batch"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, body, h := e.post(t, "/publish", tt.header, tt.body)
			assert.Equal(t, http.StatusBadRequest, code)
			if tt.exact {
				assert.Equal(t, tt.wantBody, body)
				assert.Equal(t, "text/plain; charset=utf-8", h.Get("Content-Type"))
				return
			}
			assert.Contains(t, body, tt.wantBody)
		})
	}
	e.stored(t, 0)
}

func TestPublishLegacyTypeIsCleaned(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	code, body, _ := e.post(t, "/publish", binary("l1", "sap.kyma.custom.my_app.sales.order.created.v1"), `{}`)
	require.Equal(t, http.StatusNoContent, code, body)
	got := e.stored(t, 1)[0]
	assert.Equal(t, "kyma.shop.sap.kyma.custom.myapp.salesorder.created.v1", got.Subject)
	assert.Equal(t, []string{"sap.kyma.custom.myapp.salesorder.created.v1"}, got.Header["ce-type"])
}

func TestPublishTooLarge(t *testing.T) {
	e := newEnv(t, publisher.Config{MaxRequestBytes: 100}, nil)
	big := strings.Repeat("x", 101)
	code, body, _ := e.post(t, "/publish", binary("1", "a.b"), big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Contains(t, body, "the limit is 100")

	// Without a Content-Length the limit holds while reading.
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/publish", io.MultiReader(strings.NewReader(big)))
	require.NoError(t, err)
	for k, v := range binary("2", "a.b") {
		req.Header.Set(k, v)
	}
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	code, _, _ = e.post(t, "/publish", binary("3", "a.b"), strings.Repeat("x", 100))
	assert.Equal(t, http.StatusNoContent, code, "exactly the limit is fine")
	e.stored(t, 1)
}

func TestPublishTooLargeForStream(t *testing.T) {
	e := newEnv(t, publisher.Config{MaxRequestBytes: 1 << 20}, func(c *stream.Config) { c.MaxMsgSize = 1000 })
	code, body, _ := e.post(t, "/publish", binary("1", "a.b"), strings.Repeat("x", 2000))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, body)
	e.stored(t, 0)
}

func TestPublishDeduplicates(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	for range 3 {
		code, body, _ := e.post(t, "/publish", binary("same", "order.created.v1"), `{}`)
		require.Equal(t, http.StatusNoContent, code, body)
	}
	h := binary("same", "order.created.v1")
	h["Ce-Source"] = "other"
	code, _, _ := e.post(t, "/publish", h, `{}`)
	require.Equal(t, http.StatusNoContent, code)
	got := e.stored(t, 2)
	assert.Equal(t, "kyma.shop.order.created.v1", got[0].Subject)
	assert.Equal(t, "kyma.other.order.created.v1", got[1].Subject, "same id from another source is another event")
}

func TestPublishStorageFull(t *testing.T) {
	e := newEnv(t, publisher.Config{}, func(c *stream.Config) { c.MaxBytes = 4096 })
	var code int
	var body string
	for i := 0; i < 50 && code != http.StatusInsufficientStorage; i++ {
		code, body, _ = e.post(t, "/publish", binary(fmt.Sprint(i), "a.b"), strings.Repeat("x", 500))
		require.Contains(t, []int{http.StatusNoContent, http.StatusInsufficientStorage}, code, body)
	}
	require.Equal(t, http.StatusInsufficientStorage, code, "the stream filled up")
	assert.Contains(t, body, "storage full")
}

// With NATS down, every kind of request waits for JetStream as long as its
// store timeout promises (a NATS restart shorter than it costs no
// publish), and no longer: 503 at the timeout, which requests arriving
// together share (at most a 64th more), with a batch's events stored
// within one timeout, not one each. The bounds are the configured
// timeout's, with a quarter of it for the answer to travel.
func TestPublishNATSUnavailable(t *testing.T) {
	const storeTimeout = 500 * time.Millisecond
	e := newEnv(t, publisher.Config{StoreTimeout: storeTimeout}, nil)
	e.nats.Shutdown()
	structured := map[string]string{"Content-Type": "application/cloudevents+json"}
	batch := map[string]string{"Content-Type": "application/cloudevents-batch+json"}
	tests := map[string]struct {
		path   string
		header map[string]string
		body   string
	}{
		"binary":     {path: "/publish", header: binary("1", "a.b"), body: `{}`},
		"structured": {path: "/publish", header: structured, body: `{"specversion":"1.0","id":"s1","source":"shop","type":"a.b","data":{}}`},
		"batch": {path: "/publish", header: batch, body: `[{"specversion":"1.0","id":"b1","source":"shop","type":"a.b","data":1},
			{"specversion":"1.0","id":"b2","source":"shop","type":"a.b","data":2}]`},
		"v2":        {path: "/app/v2/events", header: structured, body: `{"specversion":"1.0","id":"v1","source":"shop","type":"a.b","data":{}}`},
		"legacy v1": {path: "/app/v1/events", header: jsonHeader, body: `{"event-type":"a.b","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":1}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			code, body, h := e.post(t, tc.path, tc.header, tc.body)
			took := time.Since(start)
			assert.Equal(t, http.StatusServiceUnavailable, code, body)
			assert.Contains(t, body, "unavailable")
			assert.Equal(t, "1", h.Get("Retry-After"))
			assert.GreaterOrEqual(t, took, storeTimeout, "answered before the store timeout: NATS was not waited for")
			assert.LessOrEqual(t, took, storeTimeout+storeTimeout/64+storeTimeout/4, "answered long after the store timeout")
		})
	}
}

func TestMethodsAndHealth(t *testing.T) {
	ready := fmt.Errorf("nats: not connected")
	e := newEnv(t, publisher.Config{}, nil, publisher.WithReady(func(context.Context) error { return ready }))
	resp, err := http.Get(e.srv.URL + "/publish")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	resp, err = http.Get(e.srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(e.srv.URL + "/readyz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(b), "not connected")

	ready = nil
	resp, err = http.Get(e.srv.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// Liveness: a NATS connection that cannot come back fails it.
	live := fmt.Errorf("the NATS connection closed and will not come back")
	e = newEnv(t, publisher.Config{}, nil, publisher.WithLive(func(context.Context) error { return live }))
	resp, err = http.Get(e.srv.URL + "/healthz")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(b), "will not come back")
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := publisher.New(nil, publisher.Config{})
	require.ErrorIs(t, err, publisher.ErrInvalidOption)
	_, err = publisher.New(eventstore.New(nil, "x"), publisher.Config{MaxRequestBytes: -1})
	require.ErrorIs(t, err, publisher.ErrInvalidOption)
	_, err = publisher.New(eventstore.New(nil, "x"), publisher.Config{}, publisher.WithLogger(nil))
	require.ErrorIs(t, err, publisher.ErrInvalidOption)
}

type subs []v1alpha2.Subscription

func (s subs) ListSubscriptions(context.Context) ([]v1alpha2.Subscription, error) { return s, nil }

func TestSubscribed(t *testing.T) {
	mk := func(name string, matching v1alpha2.TypeMatching, source string, types ...string) v1alpha2.Subscription {
		return v1alpha2.Subscription{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       v1alpha2.SubscriptionSpec{TypeMatching: matching, Source: source, Types: types},
		}
	}
	list := subs{
		mk("a", v1alpha2.TypeMatchingStandard, "commerce", "order.created.v1", "order.created.v2"),
		mk("b", v1alpha2.TypeMatchingExact, "", "sap.kyma.custom.commerce.customer.created.v1", "sap.kyma.custom.other.x.y.v1"),
		mk("c", v1alpha2.TypeMatchingStandard, "other", "order.deleted.v1"),
		mk("d", "", "commerce", "order.created.v1"),
	}
	e := newEnv(t, publisher.Config{}, nil, publisher.WithSubscriptions(list))
	resp, err := http.Get(e.srv.URL + "/commerce/v1/events/subscribed")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got publisher.SubscribedEvents
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	assert.Equal(t, []publisher.SubscribedEvent{
		{Name: "customer.created", Version: "v1"},
		{Name: "order.created", Version: "v1"},
		{Name: "order.created", Version: "v2"},
	}, got.EventsInfo)

	resp, err = http.Get(e.srv.URL + "/nobody/v1/events/subscribed")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.JSONEq(t, `{"eventsInfo":[]}`, string(b))
}

// Each status code an endpoint answers is counted apart, however many
// requests came before with another.
func TestPublishCountsEachStatusCode(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	for i, id := range []string{"e1", "", "e2", ""} { // an event without id is refused
		h := binary(id, "order.created.v1")
		code, body, _ := e.post(t, "/publish", h, `{"n":1}`)
		if id == "" {
			require.Equal(t, http.StatusBadRequest, code, "request %d: %s", i, body)
		} else {
			require.Equal(t, http.StatusNoContent, code, "request %d: %s", i, body)
		}
	}
	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP kfn_eventbridge_publish_requests_total Publish requests by endpoint (publish, v2, v1, subscribed) and HTTP status code.
# TYPE kfn_eventbridge_publish_requests_total counter
kfn_eventbridge_publish_requests_total{code="204",endpoint="publish"} 2
kfn_eventbridge_publish_requests_total{code="400",endpoint="publish"} 2
`), "kfn_eventbridge_publish_requests_total"))
}

// TestFailuresLogWithinTheirLines: with the stream full every publish
// fails (507) and would log a warning each; 300 of them log at most the
// burst of FailureLinesPerSecond and its rate, and a line past the refill
// says how many were dropped.
func TestFailuresLogWithinTheirLines(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	e := newEnv(t, publisher.Config{}, func(c *stream.Config) { c.MaxBytes = 4096 }, publisher.WithLogger(log))
	start := time.Now()
	const requests = 300
	full := 0
	for i := range requests {
		code, body, _ := e.post(t, "/publish", binary(fmt.Sprint(i), "a.b"), strings.Repeat("x", 500))
		require.Contains(t, []int{http.StatusNoContent, http.StatusInsufficientStorage}, code, body)
		if code == http.StatusInsufficientStorage {
			full++
		}
	}
	lines := strings.Count(buf.String(), `"msg":"publish failed"`)
	assert.LessOrEqual(t, lines, 10*publisher.FailureLinesPerSecond+int(time.Since(start).Seconds()*publisher.FailureLinesPerSecond)+1,
		"%d failures in %s", full, time.Since(start))
	require.Greater(t, full, lines, "some lines dropped")
	i := requests
	require.Eventually(t, func() bool {
		i++
		_, _, _ = e.post(t, "/publish", binary(fmt.Sprint(i), "a.b"), strings.Repeat("x", 500))
		return strings.Contains(buf.String(), `"droppedLines"`)
	}, 10*time.Second, 50*time.Millisecond, "a line past the refill says how many were dropped")
}
