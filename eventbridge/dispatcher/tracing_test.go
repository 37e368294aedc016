package dispatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
	"github.com/kfn-dev/kfn/test/spantest"
)

// tracer is an SDK tracer provider whose spans are kept in memory as they
// end (a synchronous processor, so a span is in the exporter once End
// returns).
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spanTree is the ended spans of one test, by name.
type spanTree struct {
	t     *testing.T
	spans tracetest.SpanStubs
}

// named returns the spans called name, in the order they ended.
func (s spanTree) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range s.spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// one returns the only span called name.
func (s spanTree) one(name string) tracetest.SpanStub {
	s.t.Helper()
	got := s.named(name)
	require.Len(s.t, got, 1, "spans named %q in %v", name, s.names())
	return got[0]
}

func (s spanTree) names() []string {
	var out []string
	for _, sp := range s.spans {
		out = append(out, sp.Name)
	}
	return out
}

// attr returns a span's attribute value, or an invalid value when absent.
func attr(sp tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// childOf asserts that child's parent is parent, in the same trace.
func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	assert.Equal(t, parent.SpanContext.TraceID(), child.SpanContext.TraceID(), "%s is in the trace of %s", child.Name, parent.Name)
	assert.Equal(t, parent.SpanContext.SpanID(), child.Parent.SpanID(), "%s is a child of %s", child.Name, parent.Name)
}

// functionSpan starts the span a function host starts for a request: a
// server span, child of the request's trace context (as
// runtimes/nodejs/tracing.cjs and runtimes/python/kfnhost/tracing.py do).
func functionSpan(tp trace.TracerProvider, name string, r *http.Request) (context.Context, trace.Span) {
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return tp.Tracer("function").Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
}

// publishHTTP posts a binary-mode CloudEvent with data {} to the publisher
// at base, with the extra headers, and returns the status code.
func publishHTTP(base, id, source, typ string, extra http.Header) (int, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/publish", strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": source, "Ce-Type": typ, "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestSpanTreeOfAChainedEvent publishes an event through the publisher to
// function A, whose first attempt fails (503) and second succeeds; A's
// event goes on to function B, either as A's CloudEvent reply or emitted by
// A to the publisher as a handler does with emitCloudEvent. It checks the
// tree of spans the publisher, the dispatcher and the functions (test
// servers that start their spans as the runtimes' hosts do) made: names,
// parents, attributes and status, all in one trace, and the baggage of the
// first request reaching B.
func TestSpanTreeOfAChainedEvent(t *testing.T) {
	for _, chain := range []string{"reply", "emit"} {
		t.Run(chain, func(t *testing.T) {
			tp, exp := newTracer(t)
			b := newBridge(t, withOption(dispatcher.WithTracerProvider(tp)))
			p, err := publisher.New(b.store, publisher.Config{}, publisher.WithTracerProvider(tp))
			require.NoError(t, err)
			pub := httptest.NewServer(p)
			defer pub.Close()

			b.newSink("fn-a", func(n int, r *http.Request, w http.ResponseWriter) {
				ctx, span := functionSpan(tp, "function a", r)
				defer span.End()
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				if chain == "reply" {
					for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "r-1", "Ce-Source": "fn-a", "Ce-Type": "order.processed.v1"} {
						w.Header().Set(k, v)
					}
					w.WriteHeader(http.StatusOK)
					return
				}
				h := http.Header{}
				tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(h)) // as emitCloudEvent does
				if code, err := publishHTTP(pub.URL, "r-1", "fn-a", "order.processed.v1", h); err != nil || code != http.StatusNoContent {
					t.Errorf("emit: %d %v", code, err)
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			fnB := b.newSink("fn-b", func(_ int, r *http.Request, w http.ResponseWriter) {
				_, span := functionSpan(tp, "function b", r)
				span.End()
			})
			fast := config("backoffInitial", "10ms", "backoffMax", "10ms")
			b.subscribe(sub("a", "fn-a", fast))
			b.subscribe(sub("b", "fn-b", fast, func(s *v1alpha2.Subscription) {
				s.Spec.Source = "fn-a"
				s.Spec.Types = []string{"order.processed.v1"}
			}))

			code, err := publishHTTP(pub.URL, "e-1", "shop", "order.created.v1", http.Header{"Baggage": {"tenant=acme"}})
			require.NoError(t, err)
			require.Equal(t, http.StatusNoContent, code)

			// publish, deliver a x2, function a x2, reply (or A's publish),
			// deliver b, function b
			want := 8
			require.Eventually(t, func() bool { return fnB.count() == 1 && len(exp.GetSpans()) >= want }, wait, tick,
				"spans so far: %v", spanTree{t, exp.GetSpans()}.names())
			assert.Equal(t, "tenant=acme", fnB.deliveries()[0].header.Get("Baggage"), "the baggage of the first request reaches B")

			s := spanTree{t, exp.GetSpans()}
			publishes := s.named("POST /publish")
			require.NotEmpty(t, publishes)
			publish := publishes[0]
			assert.False(t, publish.Parent.IsValid(), "the first publish is the root")
			assert.Equal(t, trace.SpanKindServer, publish.SpanKind)
			assert.Equal(t, int64(http.StatusNoContent), attr(publish, "http.response.status_code").AsInt64())
			assert.Equal(t, "e-1", attr(publish, "cloudevents.event_id").AsString())

			delivers := s.named("deliver default/a")
			require.Len(t, delivers, 2)
			failed, ok := delivers[0], delivers[1]
			for i, d := range delivers {
				childOf(t, d, publish)
				assert.Equal(t, trace.SpanKindClient, d.SpanKind)
				assert.Equal(t, int64(i+1), attr(d, tracing.Attempt).AsInt64())
				assert.Equal(t, "e-1", attr(d, "cloudevents.event_id").AsString())
			}
			assert.Equal(t, int64(503), attr(failed, "http.response.status_code").AsInt64())
			assert.Equal(t, codes.Error, failed.Status.Code)
			assert.Equal(t, tracing.OutcomeRetry, attr(failed, tracing.Outcome).AsString())
			assert.Equal(t, int64(10), attr(failed, tracing.RetryDelay).AsInt64())
			assert.Equal(t, int64(200), attr(ok, "http.response.status_code").AsInt64())
			assert.Equal(t, codes.Unset, ok.Status.Code)
			assert.Equal(t, tracing.OutcomeDelivered, attr(ok, tracing.Outcome).AsString())
			assert.GreaterOrEqual(t, attr(failed, tracing.EventAge).AsInt64(), int64(0))
			assert.GreaterOrEqual(t, attr(ok, tracing.EventAge).AsInt64(), attr(failed, tracing.EventAge).AsInt64()+10,
				"the second attempt's event is older by the backoff at least")
			assert.Empty(t, s.named("wait default/a"), "the wait is the attempt's event age, not a span")

			fnA := s.named("function a")
			require.Len(t, fnA, 2)
			childOf(t, fnA[0], failed)
			childOf(t, fnA[1], ok)

			// The event for B, and its parent: the reply span, or A's publish.
			var origin tracetest.SpanStub
			if chain == "reply" {
				origin = s.one("reply default/a")
				childOf(t, origin, ok)
				assert.Equal(t, trace.SpanKindProducer, origin.SpanKind)
				assert.Equal(t, "r-1", attr(origin, "cloudevents.event_id").AsString())
				assert.Equal(t, "published", attr(origin, tracing.Result).AsString())
				assert.Equal(t, int64(1), attr(origin, tracing.Hops).AsInt64())
			} else {
				require.Len(t, publishes, 2)
				origin = publishes[1]
				childOf(t, origin, fnA[1])
				assert.Equal(t, "r-1", attr(origin, "cloudevents.event_id").AsString())
			}
			deliverB := s.one("deliver default/b")
			childOf(t, deliverB, origin)
			assert.Equal(t, int64(1), attr(deliverB, tracing.Attempt).AsInt64())
			assert.Equal(t, "r-1", attr(deliverB, "cloudevents.event_id").AsString())
			childOf(t, s.one("function b"), deliverB)
		})
	}
}

// TestDeadLetterSpan: an event the sink refuses for good (400) is
// dead-lettered in a span that is a child of the attempt.
func TestDeadLetterSpan(t *testing.T) {
	tp, exp := newTracer(t)
	b := newBridge(t, withOption(dispatcher.WithTracerProvider(tp)))
	b.newSink("fn", func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
	b.subscribe(sub("s", "fn"))
	b.publish("shop", "order.created.v1", "e-1", "x")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 && len(exp.GetSpans()) >= 2 }, wait, tick)
	s := spanTree{t, exp.GetSpans()}
	deliver := s.one("deliver default/s")
	assert.Equal(t, tracing.OutcomeDeadLetter, attr(deliver, tracing.Outcome).AsString())
	assert.Equal(t, codes.Error, deliver.Status.Code)
	dl := s.one("dead-letter default/s")
	childOf(t, dl, deliver)
	assert.Equal(t, tracing.OutcomeDeadLetter, attr(dl, tracing.Outcome).AsString())
	assert.Equal(t, int64(400), attr(dl, "http.response.status_code").AsInt64())
	assert.Contains(t, attr(dl, tracing.Reason).AsString(), "400")
	// The stored trace context (the harness publishes with one) is the root's.
	assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", deliver.SpanContext.TraceID().String())
}

// TestNoSpansWithoutTracing: without a tracer provider the stored trace
// context reaches the sink unchanged.
func TestNoSpansWithoutTracing(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	b.subscribe(sub("s", "fn"))
	b.publish("shop", "order.created.v1", "e-1", "x")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", k.deliveries()[0].header.Get("Traceparent"))
}

// TestUnsampledTracesPropagate: with a sampler that records nothing, no
// span is exported, and the sink still gets a traceparent of the event's
// trace (not sampled), so a function's own spans stay out of it too.
func TestUnsampledTracesPropagate(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	b := newBridge(t, withOption(dispatcher.WithTracerProvider(tp)))
	p, err := publisher.New(b.store, publisher.Config{}, publisher.WithTracerProvider(tp))
	require.NoError(t, err)
	pub := httptest.NewServer(p)
	defer pub.Close()
	k := b.newSink("fn", nil)
	b.subscribe(sub("s", "fn"))

	code, err := publishHTTP(pub.URL, "e-1", "shop", "order.created.v1", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)
	got := k.deliveries()[0].header
	require.NotEmpty(t, got.Get("Traceparent"), "the sink gets a traceparent")
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(got)))
	assert.True(t, sc.IsValid())
	assert.False(t, sc.IsSampled(), "not sampled")
	assert.Empty(t, exp.GetSpans())
}

// TestUnsampledTracesStartNoSpan: with a provider that records no child of
// an unsampled parent, an event published with an unsampled traceparent
// (and baggage) goes through the publisher, a delivery, the sink's reply,
// the reply's delivery and a dead letter without a span started (the sampler is never
// asked), and each sink gets the traceparent and baggage as published. A
// provider that does not say so has every span started, the sink a
// traceparent of the attempt's span; and a sampled trace gets its spans
// either way.
func TestUnsampledTracesStartNoSpan(t *testing.T) {
	const (
		unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
		sampled   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	for _, skips := range []bool{true, false} {
		t.Run(fmt.Sprintf("skips=%v", skips), func(t *testing.T) {
			tp := spantest.New(t, skips)
			exp := tp.Spans
			b := newBridge(t, withOption(dispatcher.WithTracerProvider(tp)))
			p, err := publisher.New(b.store, publisher.Config{}, publisher.WithTracerProvider(tp))
			require.NoError(t, err)
			pub := httptest.NewServer(p)
			defer pub.Close()
			a := b.newSink("fn-a", func(_ int, r *http.Request, w http.ResponseWriter) {
				for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "r-" + r.Header.Get("Ce-Id"), "Ce-Source": "fn-a", "Ce-Type": "order.processed.v1"} {
					w.Header().Set(k, v)
				}
				w.WriteHeader(http.StatusOK)
			})
			c := b.newSink("fn-b", nil)
			b.newSink("fn-d", func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
			b.subscribe(sub("a", "fn-a"))
			b.subscribe(sub("d", "fn-d")) // each event becomes a dead letter
			b.subscribe(sub("b", "fn-b", func(s *v1alpha2.Subscription) {
				s.Spec.Source = "fn-a"
				s.Spec.Types = []string{"order.processed.v1"}
			}))

			code, err := publishHTTP(pub.URL, "e-1", "shop", "order.created.v1", http.Header{"Traceparent": {unsampled}, "Baggage": {"tenant=acme"}})
			require.NoError(t, err)
			require.Equal(t, http.StatusNoContent, code)
			require.Eventually(t, func() bool { return c.count() == 1 && len(b.deadLetters()) == 1 }, wait, tick)
			for _, got := range []http.Header{a.deliveries()[0].header, c.deliveries()[0].header} {
				assert.Equal(t, "tenant=acme", got.Get("Baggage"), "the baggage goes on")
				sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(got)))
				assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String(), "the trace goes on")
				assert.False(t, sc.IsSampled())
				if skips {
					assert.Equal(t, unsampled, got.Get("Traceparent"), "as published")
				} else {
					assert.NotEqual(t, unsampled, got.Get("Traceparent"), "an attempt's span")
				}
			}
			if skips {
				assert.Zero(t, tp.Started(), "no span started")
			} else {
				assert.Positive(t, tp.Started())
			}
			assert.Empty(t, exp.GetSpans(), "nothing recorded")

			code, err = publishHTTP(pub.URL, "e-2", "shop", "order.created.v1", http.Header{"Traceparent": {sampled}})
			require.NoError(t, err)
			require.Equal(t, http.StatusNoContent, code)
			require.Eventually(t, func() bool { return c.count() == 2 && len(b.deadLetters()) == 2 }, wait, tick)
			s := spanTree{t, exp.GetSpans()}
			childOf(t, s.one("dead-letter default/d"), s.one("deliver default/d"))
			assert.Len(t, s.named("POST /publish"), 1, "a sampled trace gets its spans: %v", s.names())
			childOf(t, s.one("deliver default/a"), s.named("POST /publish")[0])
			childOf(t, s.one("reply default/a"), s.one("deliver default/a"))
			childOf(t, s.one("deliver default/b"), s.one("reply default/a"))
		})
	}
}
