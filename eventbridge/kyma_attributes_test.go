package eventbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
)

// delivery is what a sink received: its CloudEvents headers and body.
type delivery struct {
	header http.Header
	body   string
}

// recordingSink keeps every delivery by its ce-id and ce-source.
type recordingSink struct {
	mu  sync.Mutex
	got map[string]delivery
}

func (s *recordingSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got[r.Header.Get("Ce-Id")+"|"+r.Header.Get("Ce-Source")] = delivery{header: r.Header.Clone(), body: string(body)}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *recordingSink) get(key string) (delivery, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.got[key]
	return d, ok
}

// TestSubscribersGetWhatKymaDelivers publishes a binary, a structured and
// a legacy event as Kyma's documentation writes them and compares, one
// attribute at a time, what the subscriber receives with what Kyma's
// publisher (eventing-publisher-proxy: pkg/cloudevents/builder, pkg/legacy)
// and its JetStream dispatcher (eventing-manager: the type reverted to the
// originaltype extension, sent in binary mode by sdk-go) deliver:
//
//   - binary, Kyma's type-cleanup tutorial (type order.payment*success.v1,
//     which Kyma cleans to route): delivered with the type as published,
//     ce-originaltype the same, the producer's eventtypeversion kept;
//   - structured: delivered in binary mode, the data as the body, its
//     datacontenttype as Content-Type, ce-originaltype added;
//   - legacy (/{app}/v1/events): the standard copy has type
//     <event-type>.<version>, the application as source, the request's
//     id and time, eventtypeversion and ce-originaltype; the exact copy has
//     type sap.kyma.custom.<app>.<event>.<version>, source kyma, the same
//     id, time and eventtypeversion, and no originaltype.
func TestSubscribersGetWhatKymaDelivers(t *testing.T) {
	rec := &recordingSink{got: map[string]delivery{}}
	sink := httptest.NewServer(rec)
	t.Cleanup(sink.Close)
	cfg := eventbridge.DefaultConfig()
	cfg.Components = []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}
	cfg.Dispatcher.Egress.AllowLoopback = true
	cfg.Admin = false
	b, static, _ := bridgeOn(t, cfg, sink.URL)
	subs := []*v1alpha2.Subscription{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lastorder-payment-sub"},
			Spec: v1alpha2.SubscriptionSpec{Sink: "http://lastorder.default.svc.cluster.local", Source: "myapp",
				Types: []string{"order.payment*success.v1", "order.created.v1"}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "legacy-exact"},
			Spec: v1alpha2.SubscriptionSpec{Sink: "http://lastorder.default.svc.cluster.local", TypeMatching: v1alpha2.TypeMatchingExact,
				Types: []string{"sap.kyma.custom.myapp.order.created.v1"}},
		},
	}
	require.Empty(t, static.Apply(context.Background(), subs))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Run(ctx) }()
	h := b.Handlers().Publisher

	post := func(path string, header map[string]string, body string, want int) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, want, w.Code, w.Body.String())
	}
	// Kyma's tutorial's curl, as it writes it.
	post("/publish", map[string]string{
		"ce-specversion": "1.0", "ce-type": "order.payment*success.v1", "ce-source": "myapp",
		"ce-eventtypeversion": "v1", "ce-id": "e4bcc616-c3a9-4840-9321-763aa23851fc", "content-type": "application/json",
	}, `{"orderCode":"3211213", "orderAmount":"1250"}`, http.StatusNoContent)
	post("/publish", map[string]string{"content-type": "application/cloudevents+json"},
		`{"specversion":"1.0","type":"order.created.v1","source":"myapp","id":"structured-1","time":"2026-11-25T08:00:00Z","datacontenttype":"application/json","data":{"orderCode":"1"}}`,
		http.StatusNoContent)
	post("/myapp/v1/events", map[string]string{"content-type": "application/json"},
		`{"event-type":"order.created","event-type-version":"v1","event-id":"8954ad1c-78ed-4c58-a639-68bd44031de0","event-time":"2026-11-25T08:00:00.5Z","data":{"orderCode":"2"}}`,
		http.StatusOK)

	want := map[string]struct {
		header map[string]string // "" means absent
		body   string
	}{
		"e4bcc616-c3a9-4840-9321-763aa23851fc|myapp": {map[string]string{
			"Ce-Specversion": "1.0", "Ce-Type": "order.payment*success.v1", "Ce-Source": "myapp",
			"Ce-Originaltype": "order.payment*success.v1", "Ce-Eventtypeversion": "v1", "Content-Type": "application/json", "Ce-Time": "",
		}, `{"orderCode":"3211213", "orderAmount":"1250"}`},
		"structured-1|myapp": {map[string]string{
			"Ce-Specversion": "1.0", "Ce-Type": "order.created.v1", "Ce-Source": "myapp", "Ce-Time": "2026-11-25T08:00:00Z",
			"Ce-Originaltype": "order.created.v1", "Ce-Eventtypeversion": "", "Content-Type": "application/json", "Ce-Datacontenttype": "",
		}, `{"orderCode":"1"}`},
		"8954ad1c-78ed-4c58-a639-68bd44031de0|myapp": {map[string]string{
			"Ce-Specversion": "1.0", "Ce-Type": "order.created.v1", "Ce-Source": "myapp", "Ce-Time": "2026-11-25T08:00:00.5Z",
			"Ce-Originaltype": "order.created.v1", "Ce-Eventtypeversion": "v1", "Content-Type": "application/json",
		}, `{"orderCode":"2"}`},
		"8954ad1c-78ed-4c58-a639-68bd44031de0|kyma": {map[string]string{
			"Ce-Specversion": "1.0", "Ce-Type": "sap.kyma.custom.myapp.order.created.v1", "Ce-Source": "kyma", "Ce-Time": "2026-11-25T08:00:00.5Z",
			"Ce-Originaltype": "", "Ce-Eventtypeversion": "v1", "Content-Type": "application/json",
		}, `{"orderCode":"2"}`},
	}
	for key, w := range want {
		t.Run(key, func(t *testing.T) {
			var d delivery
			require.Eventually(t, func() bool {
				var ok bool
				d, ok = rec.get(key)
				return ok
			}, 10*time.Second, 10*time.Millisecond, "delivered")
			for name, v := range w.header {
				if v == "" {
					assert.NotContains(t, d.header, name, "absent in Kyma's delivery")
					continue
				}
				assert.Equal(t, v, d.header.Get(name), name)
			}
			assert.Equal(t, w.body, d.body, "data")
		})
	}
}

// TestDeliveryPercentEncodesAttributes publishes a structured event whose
// extension holds %41, a space, a double quote and non-ASCII characters:
// on the wire the dispatcher writes them
// percent-encoded, as the CloudEvents HTTP binding asks of a sender in
// binary mode, so a receiver that decodes as the binding asks reads
// exactly what was published (written raw, %41 would read as A). sdk-go's
// receiver (v2.16) does not decode: it reads the header as sent, which the
// README says.
func TestDeliveryPercentEncodesAttributes(t *testing.T) {
	rec := &recordingSink{got: map[string]delivery{}}
	sink := httptest.NewServer(rec)
	t.Cleanup(sink.Close)
	cfg := eventbridge.DefaultConfig()
	cfg.Components = []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}
	cfg.Dispatcher.Egress.AllowLoopback = true
	cfg.Admin = false
	b, static, _ := bridgeOn(t, cfg, sink.URL)
	sub := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec:       v1alpha2.SubscriptionSpec{Sink: "http://orders.default.svc.cluster.local", Source: "myapp", Types: []string{"order.created.v1"}},
	}
	require.Empty(t, static.Apply(context.Background(), []*v1alpha2.Subscription{sub}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Run(ctx) }()

	const value = `%41 "quoted" café €`
	body, err := json.Marshal(map[string]any{
		"specversion": "1.0", "type": "order.created.v1", "source": "myapp", "id": "p1",
		"myext": value, "datacontenttype": "application/json", "data": map[string]int{"n": 1},
	})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/publish", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	w := httptest.NewRecorder()
	b.Handlers().Publisher.ServeHTTP(w, req)
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())

	var d delivery
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, got := range rec.got {
			if got.header.Get("Ce-Id") == "p1" {
				d = got
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "delivered")

	const wire = "%2541%20%22quoted%22%20caf%C3%A9%20%E2%82%AC"
	assert.Equal(t, wire, d.header.Get("Ce-Myext"), "percent-encoded on the wire")
	assert.Equal(t, "order.created.v1", d.header.Get("Ce-Type"), "nothing to encode, written as it is")
	decoded, err := url.PathUnescape(d.header.Get("Ce-Myext"))
	require.NoError(t, err)
	assert.Equal(t, value, decoded, "a receiver that decodes as the binding asks reads the extension as published")

	// sdk-go's own receiver, as a Go subscriber writes it.
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(d.body))
	r.Header = d.header.Clone()
	e, err := binding.ToEvent(context.Background(), cehttp.NewMessageFromHttpRequest(r))
	require.NoError(t, err)
	assert.Equal(t, wire, e.Extensions()["myext"], "sdk-go does not percent-decode (README: 'attribute values on the wire')")
}
