package publisher_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
	"github.com/kfn-dev/kfn/test/spantest"
)

// publishDurations returns the observation count of
// kfn_eventbridge_publish_duration_seconds per endpoint.
func (e *env) publishDurations(t *testing.T) map[string]uint64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "kfn_eventbridge_publish_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "endpoint")] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestPublishDuration: requests whose events were stored are timed, per
// endpoint; refused ones are only counted.
func TestPublishDuration(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil)
	code, body, _ := e.post(t, "/publish", binary("e1", "order.created.v1"), `{}`)
	require.Equal(t, http.StatusNoContent, code, body)
	code, _, _ = e.post(t, "/publish", binary("", "order.created.v1"), `{}`)
	require.Equal(t, http.StatusBadRequest, code)
	code, body, _ = e.post(t, "/app/v1/events", map[string]string{"Content-Type": "application/json"},
		`{"event-type":"order.created","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{}}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, map[string]uint64{"publish": 1, "v1": 1, "v2": 0}, e.publishDurations(t), "every endpoint has its series from the start")
}

// TestPublishSpans: with a tracer provider, each publish request is a
// server span, child of the request's traceparent, and the stored trace
// context is the span's; a request the store refuses is an error span.
func TestPublishSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	e := newEnv(t, publisher.Config{}, nil, publisher.WithTracerProvider(tp))

	const incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := map[string]struct {
		path   string
		header map[string]string
		body   string
		route  string
		code   int
		stored int
	}{
		"binary": {path: "/publish", header: binary("e1", "order.created.v1"), body: `{}`, route: "POST /publish", code: http.StatusNoContent, stored: 1},
		"v2":     {path: "/app/v2/events", header: binary("e2", "order.created.v1"), body: `{}`, route: "POST /{app}/v2/events", code: http.StatusNoContent, stored: 1},
		"legacy": {path: "/app/v1/events", header: map[string]string{"Content-Type": "application/json"}, route: "POST /{app}/v1/events", code: http.StatusOK, stored: 2,
			body: `{"event-type":"order.created","event-type-version":"v1","event-id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","event-time":"2026-01-02T03:04:05Z","data":{}}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			exp.Reset()
			tt.header["Traceparent"] = incoming
			code, body, _ := e.post(t, tt.path, tt.header, tt.body)
			require.Equal(t, tt.code, code, body)
			spans := exp.GetSpans()
			require.Len(t, spans, 1)
			sp := spans[0]
			assert.Equal(t, tt.route, sp.Name)
			assert.Equal(t, trace.SpanKindServer, sp.SpanKind)
			assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", sp.SpanContext.TraceID().String())
			assert.Equal(t, "b7ad6b7169203331", sp.Parent.SpanID().String())
			assert.Equal(t, int64(tt.code), attrInt(sp, "http.response.status_code"))
			assert.Equal(t, codes.Unset, sp.Status.Code)
			stored := e.stored(t, tt.stored)
			want := "00-0af7651916cd43dd8448eb211c80319c-" + sp.SpanContext.SpanID().String() + "-01"
			for _, s := range stored {
				assert.Equal(t, []string{want}, s.Header["traceparent"], "the span's context is stored, not the request's")
			}
		})
	}
}

// TestPublishSpanOfAFailedStore: a publish JetStream does not take is an
// error span with its status code.
func TestPublishSpanOfAFailedStore(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	e := newEnv(t, publisher.Config{StoreTimeout: 200 * time.Millisecond}, nil, publisher.WithTracerProvider(tp))
	e.nats.Shutdown()
	code, _, _ := e.post(t, "/publish", binary("e1", "order.created.v1"), `{}`)
	require.Equal(t, http.StatusServiceUnavailable, code)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	assert.Equal(t, codes.Error, spans[0].Status.Code)
	assert.Equal(t, int64(http.StatusServiceUnavailable), attrInt(spans[0], "http.response.status_code"))
	assert.Equal(t, "e1", attrString(spans[0], "cloudevents.event_id"))
}

func attrInt(sp tracetest.SpanStub, key string) int64 {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInt64()
		}
	}
	return -1
}

func attrString(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}

// TestUnsampledRequestsStartNoSpan: on every route, a request whose
// traceparent is not sampled starts no span with a provider that records
// none (the sampler is not asked), and its events are stored with the
// request's traceparent, tracestate and baggage as they came; a provider
// that does not say so starts one, whose context is stored.
func TestUnsampledRequestsStartNoSpan(t *testing.T) {
	const incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	routes := map[string]struct {
		path   string
		header func() map[string]string
		body   string
		stored int
	}{
		"binary": {path: "/publish", header: func() map[string]string { return binary("e1", "order.created.v1") }, body: `{}`, stored: 1},
		"v2":     {path: "/app/v2/events", header: func() map[string]string { return binary("e2", "order.created.v1") }, body: `{}`, stored: 1},
		"legacy": {path: "/app/v1/events", header: func() map[string]string { return map[string]string{"Content-Type": "application/json"} }, stored: 2,
			body: `{"event-type":"order.created","event-type-version":"v1","event-id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","event-time":"2026-01-02T03:04:05Z","data":{}}`},
	}
	for _, skips := range []bool{true, false} {
		for name, r := range routes {
			t.Run(fmt.Sprintf("%s/skips=%v", name, skips), func(t *testing.T) {
				tp := spantest.New(t, skips)
				e := newEnv(t, publisher.Config{}, nil, publisher.WithTracerProvider(tp))
				h := r.header()
				h["Traceparent"], h["Tracestate"], h["Baggage"] = incoming, "k=v", "tenant=acme"
				code, body, _ := e.post(t, r.path, h, r.body)
				require.Less(t, code, 300, body)
				for _, s := range e.stored(t, r.stored) {
					assert.Equal(t, []string{"tenant=acme"}, s.Header["baggage"], "the baggage is stored")
					assert.Equal(t, []string{"k=v"}, s.Header["tracestate"])
					if skips {
						assert.Equal(t, []string{incoming}, s.Header["traceparent"], "as it came")
					} else {
						require.Len(t, s.Header["traceparent"], 1)
						assert.NotEqual(t, incoming, s.Header["traceparent"][0], "the span's")
						assert.True(t, strings.HasPrefix(s.Header["traceparent"][0], "00-0af7651916cd43dd8448eb211c80319c-"), "in the request's trace")
					}
				}
				if skips {
					assert.Zero(t, tp.Started(), "no span started")
				} else {
					assert.Positive(t, tp.Started())
				}
			})
		}
	}
}

// TestPublishSpanNamesItsEvents: a structured request's span has its
// event's id and type; a batch's, the number of its events (one event in a
// batch is a batch of one).
func TestPublishSpanNamesItsEvents(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	e := newEnv(t, publisher.Config{}, nil, publisher.WithTracerProvider(tp))
	one := `{"specversion":"1.0","id":"s1","source":"shop","type":"order.paid.v1","data":"one"}`
	tests := map[string]struct {
		contentType, body string
		stored            int
		id, eventType     string
		count             int64
	}{
		"structured":   {contentType: "application/cloudevents+json", body: one, stored: 1, id: "s1", eventType: "order.paid.v1", count: -1},
		"batch of two": {contentType: "application/cloudevents-batch+json", body: "[" + strings.Replace(one, `"s1"`, `"s4"`, 1) + "," + strings.Replace(one, `"s1"`, `"s5"`, 1) + "]", stored: 2, count: 2},
		"batch of one": {contentType: "application/cloudevents-batch+json", body: "[" + strings.Replace(one, `"s1"`, `"s3"`, 1) + "]", stored: 1, id: "s3", eventType: "order.paid.v1", count: -1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			exp.Reset()
			code, body, _ := e.post(t, "/publish", map[string]string{"Content-Type": tt.contentType}, tt.body)
			require.Equal(t, http.StatusNoContent, code, body)
			e.stored(t, tt.stored)
			spans := exp.GetSpans()
			require.Len(t, spans, 1)
			assert.Equal(t, tt.id, attrString(spans[0], "cloudevents.event_id"))
			assert.Equal(t, tt.eventType, attrString(spans[0], "cloudevents.event_type"))
			assert.Equal(t, tt.count, attrInt(spans[0], "messaging.batch.message_count"))
		})
	}
}

// TestNewTracesAreDecidedBeforeASpan: with a provider that decides a new
// trace's sampling first (tracing.RootsOf), a request without a
// traceparent that is not sampled starts no span, and its event is stored
// with the traceparent of a new, unsampled trace (so that what follows it
// is not sampled either); one that is sampled is a span whose trace id
// is the one decided on, and whose context is stored. With a ratio of
// 0.5, about half of them are; with a request's baggage kept either way.
func TestNewTracesAreDecidedBeforeASpan(t *testing.T) {
	const n = 100
	tp := spantest.WithRoots(t, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.5)), true)
	e := newEnv(t, publisher.Config{}, nil, publisher.WithTracerProvider(tp))
	for i := range n {
		h := binary(fmt.Sprintf("e%d", i), "order.created.v1")
		h["Baggage"] = "tenant=acme"
		h["Tracestate"] = "k=v" // with no traceparent: not a trace context (W3C), never stored
		code, body, _ := e.post(t, "/publish", h, `{}`)
		require.Equal(t, http.StatusNoContent, code, body)
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range tp.Spans.GetSpans().Snapshots() {
		spans[s.SpanContext().TraceID().String()+"-"+s.SpanContext().SpanID().String()] = s
	}
	sampled := 0
	for _, s := range e.stored(t, n) {
		require.Len(t, s.Header["traceparent"], 1)
		parent := s.Header["traceparent"][0]
		assert.Equal(t, []string{"tenant=acme"}, s.Header["baggage"])
		assert.Empty(t, strings.Join(s.Header["tracestate"], ""), "a tracestate without its traceparent is dropped")
		if tracing.NotSampled(parent) {
			continue
		}
		sampled++
		require.True(t, strings.HasSuffix(parent, "-01"), "sampled or not: %s", parent)
		span, ok := spans[parent[3:52]]
		require.True(t, ok, "the stored context is a span's: %s", parent)
		assert.Equal(t, trace.SpanKindServer, span.SpanKind())
	}
	assert.Equal(t, len(spans), sampled, "a span for each sampled event, none for the others")
	assert.Equal(t, int64(sampled), tp.Started(), "a span started only for the sampled ones")
	assert.InDelta(t, n/2, sampled, n/5, "about half sampled")
}
