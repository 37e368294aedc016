package dispatcher_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/tracing"
)

func TestDeliversBinaryCloudEvent(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("orders", nil)
	b.subscribe(sub("orders", "orders"))
	b.publish("shop", "order.created.v1", "e1", "hello")

	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)
	got := k.deliveries()[0]
	assert.Equal(t, "hello", got.body)
	assert.Equal(t, "1.0", got.header.Get("Ce-Specversion"))
	assert.Equal(t, "e1", got.header.Get("Ce-Id"))
	assert.Equal(t, "shop", got.header.Get("Ce-Source"))
	assert.Equal(t, "order.created.v1", got.header.Get("Ce-Type"))
	assert.Equal(t, "text/plain", got.header.Get("Content-Type"))
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", got.header.Get("Traceparent"))
	assert.Empty(t, got.header.Get("Nats-Msg-Id"), "JetStream headers stay inside")

	require.Eventually(t, func() bool { return b.consumerInfo(sub("orders", "orders")).NumAckPending == 0 }, wait, tick, "acknowledged")
	require.NoError(t, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_delivered_total Events delivered to the sink (2xx).
# TYPE kfn_eventbridge_delivered_total counter
kfn_eventbridge_delivered_total{namespace="default",subscription="orders"} 1
`), "kfn_eventbridge_delivered_total"))
}

func TestMatching(t *testing.T) {
	b := newBridge(t)
	std := b.newSink("std", nil)
	exact := b.newSink("exact", nil)
	legacy := b.newSink("legacy", nil)
	b.subscribe(sub("std", "std", func(s *v1alpha2.Subscription) {
		s.Spec.Source = "/my.shop"
		s.Spec.Types = []string{"order.created.v1"}
	}))
	// As in Kyma, an exact type is <clean source>.<clean type>.
	b.subscribe(sub("exact", "exact", func(s *v1alpha2.Subscription) {
		s.Spec.TypeMatching = v1alpha2.TypeMatchingExact
		s.Spec.Source = ""
		s.Spec.Types = []string{"myshop.order.created.v1"}
	}))
	// A legacy type is matched from any source.
	b.subscribe(sub("legacy", "legacy", func(s *v1alpha2.Subscription) {
		s.Spec.TypeMatching = v1alpha2.TypeMatchingExact
		s.Spec.Source = ""
		s.Spec.Types = []string{"sap.kyma.custom.shop.order.created.v1"}
	}))

	b.publish("/my.shop", "order.created.v1", "1", "std, exact: same source")
	b.publish("myshop", "order.created.v1", "2", "std, exact: source cleans alike")
	b.publish("other", "order.created.v1", "3", "nobody: other source")
	b.publish("/my.shop", "order.deleted.v1", "4", "nobody: other type")
	b.publish("anyone", "myshop.order.created.v1", "5", "nobody: the exact type is not the event's type")
	b.publish("anyone", "sap.kyma.custom.shop.order.created.v1", "6", "legacy: any source")
	b.publish("anyone", "sap.kyma.custom.shop.order.created.v1*", "7", "nobody: same subject, not the exact type")
	b.publish("x", "sap.kyma.custom.shop.order.created.v1", "8", "legacy")

	require.Eventually(t, func() bool { return std.count() == 2 && exact.count() == 2 && legacy.count() == 2 }, wait, tick)
	ids := func(k *sink) []string {
		var out []string
		for _, d := range k.deliveries() {
			out = append(out, d.header.Get("Ce-Id"))
		}
		return out
	}
	assert.ElementsMatch(t, []string{"1", "2"}, ids(std))
	assert.ElementsMatch(t, []string{"1", "2"}, ids(exact))
	assert.ElementsMatch(t, []string{"6", "8"}, ids(legacy))
	require.Eventually(t, func() bool { return b.consumerInfo(sub("legacy", "legacy")).NumAckPending == 0 }, wait, tick, "the non-matching event is settled too")
	assert.Equal(t, 2, legacy.count())
	assert.Equal(t, 2, exact.count())
}

// An event on a Subscription's subject that is not one it asked for
// (cleaning mapped another type onto the subject) is acknowledged and no
// longer counts against the Subscription's held bytes: with room for two
// events, ten that do not match leave room for the one that does.
func TestEventsNotAskedForFreeTheirBytes(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.MaxHeldBytesPerSubscription = 2 << 10 }))
	legacy := b.newSink("legacy", nil)
	s := sub("legacy", "legacy", func(s *v1alpha2.Subscription) {
		s.Spec.TypeMatching = v1alpha2.TypeMatchingExact
		s.Spec.Source = ""
		s.Spec.Types = []string{"sap.kyma.custom.shop.order.created.v1"}
	})
	b.subscribe(s)
	data := strings.Repeat("x", 1<<10)
	for i := range 10 {
		b.publish("anyone", "sap.kyma.custom.shop.order.created.v1*", "other-"+strconv.Itoa(i), data)
	}
	b.publish("anyone", "sap.kyma.custom.shop.order.created.v1", "asked", data)
	require.Eventually(t, func() bool { return legacy.count() == 1 }, wait, tick, "the event asked for is delivered")
	assert.Equal(t, "asked", legacy.deliveries()[0].header.Get("Ce-Id"))
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 }, wait, tick, "the others are settled")
}

func TestOrderWithOneInFlight(t *testing.T) {
	b := newBridge(t)
	var failures atomic.Int32
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		if rand.IntN(4) == 0 { // a quarter of the attempts fail
			failures.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b.subscribe(sub("s", "fn", config("maxInFlightMessages", "1", "maxDeliver", "100", "backoffInitial", "10ms", "backoffMax", "20ms")))
	const n = 40
	for i := range n {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() == n+int(failures.Load()) }, wait, tick)
	require.Eventually(t, func() bool { return b.consumerInfo(sub("s", "fn")).NumAckPending == 0 }, wait, tick)

	var acked []int
	last := -1
	for _, d := range k.deliveries() {
		id, _ := strconv.Atoi(d.header.Get("Ce-Id"))
		require.GreaterOrEqual(t, id, last, "an event never overtakes an earlier one")
		if id != last {
			acked = append(acked, id)
		}
		last = id
	}
	assert.Len(t, acked, n)
	assert.Equal(t, 1, k.maxInFlight())
}

func TestInFlightLimitAcrossReplicas(t *testing.T) {
	b := newBridge(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) { <-release })
	s := sub("s", "fn", config("maxInFlightMessages", "3"))
	b.subscribe(s)
	// A second dispatcher replica on its own connection serves the same Subscription.
	d2, err := dispatcher.New(b.nats.JetStream(), dispatcher.Config{Streams: b.streams, PullExpiry: time.Second, Egress: loopback},
		dispatcher.WithResolver(dispatcher.ResolverFunc(b.resolve)))
	require.NoError(t, err)
	require.NoError(t, d2.Upsert(s))
	ctx, cancel := contextWithCancel()
	done := make(chan struct{})
	go func() { _ = d2.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Cleanups run last first: a failing assertion below releases the held
	// requests before the replica stops and the sink closes, both of which
	// wait for those requests, so a failure cannot hang the package.
	t.Cleanup(free)

	for i := range 12 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() == 3 }, wait, tick)
	require.Never(t, func() bool { return k.count() > 3 }, 300*time.Millisecond, tick, "never more than maxInFlightMessages across replicas")
	free()
	require.Eventually(t, func() bool { return k.count() == 12 }, wait, tick)
	assert.Equal(t, 3, k.maxInFlight())
}

func TestRetryBackoffThenDeadLetter(t *testing.T) {
	tp, spans := newTracer(t)
	b := newBridge(t, withOption(dispatcher.WithTracerProvider(tp)))
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	s := sub("s", "fn", config("maxDeliver", "4", "backoffInitial", "100ms", "backoffMax", "300ms"))
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "x", "payload")

	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)
	got := k.deliveries()
	require.Len(t, got, 4, "maxDeliver attempts")
	// Backoff without jitter: 100ms, 200ms, 300ms (capped). Each attempt's
	// span says the delay the dispatcher asked for, exactly; the sink saw
	// at least that much between attempts. How much longer depends on the
	// machine's load, which a test cannot bound: the delays come from the
	// spans, not the clock.
	// The last attempt's span ends after its dead letter is published: it
	// may not be recorded yet when the dead letter is seen.
	var delivers []tracetest.SpanStub
	require.Eventually(t, func() bool {
		delivers = spanTree{t, spans.GetSpans()}.named("deliver default/s")
		return len(delivers) >= 4
	}, wait, tick)
	require.Len(t, delivers, 4, "one span per attempt")
	var delays []int64
	for _, sp := range delivers[:3] {
		delays = append(delays, attr(sp, tracing.RetryDelay).AsInt64())
	}
	assert.Equal(t, []int64{100, 200, 300}, delays, "the delays asked for, in ms")
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		assert.GreaterOrEqual(t, got[i+1].at.Sub(got[i].at), want, "gap %d", i)
	}
	dl := b.deadLetters()[0]
	assert.Equal(t, "payload", string(dl.Data()))
	assert.Equal(t, "x", dl.Headers().Get("ce-id"))
	assert.Equal(t, "500", dl.Headers().Get(deadletter.HeaderStatus))
	assert.Equal(t, "4", dl.Headers().Get(deadletter.HeaderAttempts))
	assert.Equal(t, "default", dl.Headers().Get(deadletter.HeaderNamespace))
	assert.Equal(t, "s", dl.Headers().Get(deadletter.HeaderSubscription))
	assert.Contains(t, dl.Headers().Get(deadletter.HeaderError), "sink answered 500")
	assert.Equal(t, "kyma.shop.order.created.v1", dl.Headers().Get(deadletter.HeaderSubject))
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 }, wait, tick, "terminated in the event stream")
	require.NoError(t, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_dead_lettered_total Events moved to the dead-letter stream.
# TYPE kfn_eventbridge_dead_lettered_total counter
kfn_eventbridge_dead_lettered_total{namespace="default",subscription="s"} 1
# HELP kfn_eventbridge_delivery_failures_total Failed delivery attempts.
# TYPE kfn_eventbridge_delivery_failures_total counter
kfn_eventbridge_delivery_failures_total{namespace="default",subscription="s"} 4
`), "kfn_eventbridge_dead_lettered_total", "kfn_eventbridge_delivery_failures_total"))
}

func TestRetryableStatuses(t *testing.T) {
	for _, status := range []int{408, 429, 500, 502, 503, 504} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			assert.Equal(t, dispatcher.Retry, dispatcher.Judge(status))
		})
	}
	assert.Equal(t, dispatcher.Retry, dispatcher.Judge(0), "network error")
	for _, status := range []int{200, 201, 202, 204} {
		assert.Equal(t, dispatcher.Done, dispatcher.Judge(status))
	}
	for _, status := range []int{300, 301, 302, 307, 308, 400, 401, 403, 404, 405, 409, 410, 413, 422} {
		assert.Equal(t, dispatcher.GiveUp, dispatcher.Judge(status), "%d", status)
	}
}

// A sink that answers 429 or 503 with Retry-After is not asked again
// before that delay, however short the Subscription's backoff.
func TestRetryAfterIsHonoured(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			b := newBridge(t)
			k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
				if n == 1 {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(status)
				}
			})
			b.subscribe(sub("s", "fn", config("backoffInitial", "10ms")))
			b.publish("shop", "order.created.v1", "x", "")
			require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick)
			got := k.deliveries()
			assert.GreaterOrEqual(t, got[1].at.Sub(got[0].at), time.Second)
		})
	}
}

func TestNonRetryable4xxIsDeadLetteredAtOnce(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
	})
	b.subscribe(sub("s", "fn", config("maxDeliver", "10")))
	b.publish("shop", "order.created.v1", "x", "")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)
	assert.Equal(t, 1, k.count(), "not retried")
	assert.Equal(t, "400", b.deadLetters()[0].Headers().Get(deadletter.HeaderStatus))
}

func TestOperatorDeliveryDefaults(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) {
		c.Delivery = v1alpha2.Delivery{MaxInFlight: 10, MaxDeliver: 2, BackoffInitial: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond, DeadLetter: true, MaxBacklog: 1000}
	}))
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	b.subscribe(sub("s", "fn"))
	b.publish("shop", "order.created.v1", "x", "payload")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)
	assert.Len(t, k.deliveries(), 2, "the operator's maxDeliver applies to a Subscription that sets none")

	_, err := dispatcher.New(b.js, dispatcher.Config{Streams: b.streams, Delivery: v1alpha2.Delivery{MaxInFlight: 1}})
	require.ErrorIs(t, err, dispatcher.ErrInvalidOption, "invalid delivery defaults are refused")
}

func TestDeadLetterOff(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) })
	s := sub("s", "fn", config("deadLetter", "false"))
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "x", "")
	require.Eventually(t, func() bool { return k.count() == 1 && b.consumerInfo(s).NumAckPending == 0 }, wait, tick)
	assert.Empty(t, b.deadLetters())
}

func TestNetworkErrorIsRetried(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", nil)
	url := k.srv.URL
	var calls atomic.Int32
	// A second dispatcher, whose resolver first points at a closed port.
	d, err := dispatcher.New(b.js, dispatcher.Config{Streams: b.streams, Jitter: -1, PullExpiry: time.Second, Egress: loopback},
		dispatcher.WithResolver(dispatcher.ResolverFunc(func(v1alpha2.Sink) (string, error) {
			if calls.Add(1) == 1 {
				return "http://127.0.0.1:1/", nil
			}
			return url, nil
		})))
	require.NoError(t, err)
	s := sub("s", "fn", config("backoffInitial", "10ms"))
	b.subscribeWith(d, s)
	b.publish("shop", "order.created.v1", "x", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)
	assert.GreaterOrEqual(t, calls.Load(), int32(2))
}

// TestTimedOutDeliveryIsDeliveredAgain: a sink that does not answer within
// the request timeout has not taken the event, whatever it does later. The
// attempt counts as failed and the event is delivered again.
func TestTimedOutDeliveryIsDeliveredAgain(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.RequestTimeout = 200 * time.Millisecond }))
	gaveUp := make(chan struct{})
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		if n == 1 {
			<-r.Context().Done() // the dispatcher went away without the answer
			close(gaveUp)
		}
	})
	s := sub("s", "fn", config("backoffInitial", "10ms"))
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "x", "")

	select {
	case <-gaveUp:
	case <-time.After(wait):
		t.Fatal("the dispatcher never gave up on the request that outlived the timeout")
	}
	require.Eventually(t, func() bool { return k.count() == 2 && b.consumerInfo(s).NumAckPending == 0 }, wait, tick,
		"delivered again after the timed-out attempt")
	ids := []string{k.deliveries()[0].header.Get("Ce-Id"), k.deliveries()[1].header.Get("Ce-Id")}
	assert.Equal(t, []string{"x", "x"}, ids)
	assert.Empty(t, b.deadLetters())
	require.NoError(t, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_delivered_total Events delivered to the sink (2xx).
# TYPE kfn_eventbridge_delivered_total counter
kfn_eventbridge_delivered_total{namespace="default",subscription="s"} 1
# HELP kfn_eventbridge_delivery_failures_total Failed delivery attempts.
# TYPE kfn_eventbridge_delivery_failures_total counter
kfn_eventbridge_delivery_failures_total{namespace="default",subscription="s"} 1
`), "kfn_eventbridge_delivered_total", "kfn_eventbridge_delivery_failures_total"))
}

// While a sink has no ready endpoint its events wait, as backlog, and no
// attempt is spent on them. That nothing was delivered is seen against a
// witness: a Subscription to the same events whose sink is always ready
// has got them. The sink answers 503 while not ready, as a Service without
// endpoints does, so that an attempt spent at zero would fail and, with
// maxDeliver 1, be dead-lettered.
func TestScaleToZeroWaitsWithoutSpendingAttempts(t *testing.T) {
	eps, b, k, witness, s := atZero(t)
	for i := range 5 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return witness.count() == 5 }, wait, tick, "the witness got the events")
	assert.Zero(t, k.count(), "nothing delivered at zero")
	info := b.consumerInfo(s)
	assert.Equal(t, uint64(5), info.NumPending, "events wait in the stream as backlog")
	assert.Zero(t, info.NumAckPending, "nothing pulled")
	assert.Zero(t, info.NumRedelivered)

	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 5 }, wait, tick)
	assert.Empty(t, b.deadLetters(), "maxDeliver 1 was enough: no attempt was spent while at zero")

	// Back to zero: the next event waits again.
	eps.set(false)
	b.publish("shop", "order.created.v1", "later", "")
	require.Eventually(t, func() bool { return witness.count() == 6 }, wait, tick, "the witness got the event")
	assert.Equal(t, 5, k.count(), "the event waits while at zero")
	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 6 }, wait, tick)
	assert.Empty(t, b.deadLetters(), "no attempt was spent while at zero")
}

// TestAWokenSinkIsPulledAtOnce: a sink that is ready again (a Function
// woken from zero) is pulled for without asking JetStream for its
// consumer again, a round trip on the first event's path: the requests
// for the consumer's info, seen on the JetStream API's subject, are
// counted from the moment the sink is ready to the event's delivery.
// Fails when the worker looks the consumer up at each wake.
func TestAWokenSinkIsPulledAtOnce(t *testing.T) {
	eps := newEndpoints(true)
	b := newBridge(t, withEndpoints(eps))
	k := b.newSink("fn", nil)
	s := sub("s", "fn")
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "first", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)

	eps.set(false)
	lookups := countLookups(t, b, s)
	b.publish("shop", "order.created.v1", "wake", "")
	lookups.Store(0)
	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick)
	assert.Zero(t, lookups.Load(), "the consumer was not looked up again")
}

// TestEventsArePulledWhileTheirSinkWakes: while a standby pod is being
// claimed for a sink at zero (Waking), its events are pulled ahead of its
// readiness and wait, no attempt spent, to be delivered the moment it is
// ready (not a pull's round trip after); after a wake that ends without
// a ready sink (the claim failed) the events pulled wait, as those pulled
// before a sink went away do (the pull asks for no more; its requests
// under way still bring what they asked for), and are delivered once when
// the sink is ready later. The sink answers 503 while not ready and
// maxDeliver is 1, so that an attempt spent before readiness would
// dead-letter its event. Fails when the worker does not pull while the
// sink wakes.
func TestEventsArePulledWhileTheirSinkWakes(t *testing.T) {
	eps, b, k, witness, s := atZero(t)
	b.publish("shop", "order.created.v1", "first", "")
	require.Eventually(t, func() bool { return witness.count() == 1 }, wait, tick, "the witness got the event")
	assert.Zero(t, b.consumerInfo(s).NumAckPending, "nothing pulled at zero")

	eps.setWaking(true)
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 1 }, wait, tick, "pulled while the sink wakes")
	assert.Zero(t, b.consumerInfo(s).NumPending)
	assert.Zero(t, k.count(), "not delivered before the sink is ready")

	// The wake ends without a ready sink: what was pulled waits.
	eps.setWaking(false)
	b.publish("shop", "order.created.v1", "second", "")
	require.Eventually(t, func() bool { return witness.count() == 2 }, wait, tick, "the witness got the event")
	require.Never(t, func() bool { return k.count() > 0 }, 200*time.Millisecond, 20*time.Millisecond, "nothing delivered before the sink is ready")

	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 2 && b.consumerInfo(s).NumAckPending == 0 }, wait, tick)
	var ids []string
	for _, d := range k.deliveries() {
		ids = append(ids, d.header.Get("Ce-Id"))
	}
	assert.ElementsMatch(t, []string{"first", "second"}, ids, "each delivered once")
	assert.Empty(t, b.deadLetters(), "no attempt was spent before the sink was ready")
}

// atZero is a bridge whose sink "fn" has no ready endpoint (eps), with
// Subscription s (maxDeliver 1) to it, and a witness: a Subscription to
// the same events whose sink is always ready. The sink answers 503 while
// not ready, as a Service without endpoints does, so that an attempt spent
// at zero would fail and be dead-lettered.
func atZero(t *testing.T) (eps *endpoints, b *bridge, k, witness *sink, s *v1alpha2.Subscription) {
	t.Helper()
	eps = newEndpoints(false, "witness")
	b = newBridge(t, withEndpoints(eps))
	k = b.newSink("fn", func(_ int, _ *http.Request, w http.ResponseWriter) {
		if !eps.isReady() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	witness = b.newSink("witness", nil)
	s = sub("s", "fn", config("maxDeliver", "1"))
	b.subscribe(s)
	b.subscribe(sub("witness", "witness"))
	return eps, b, k, witness, s
}

// countLookups counts the requests for s's consumer's info, as they are
// seen on the JetStream API's subject from now on.
func countLookups(t *testing.T, b *bridge, s *v1alpha2.Subscription) *atomic.Int32 {
	t.Helper()
	nc := b.nats.Connect()
	var lookups atomic.Int32
	info, err := nc.Subscribe("$JS.API.CONSUMER.INFO."+b.streams.EventStream+"."+stream.ConsumerName(s.Namespace, s.Name), func(*nats.Msg) { lookups.Add(1) })
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	t.Cleanup(func() { _ = info.Unsubscribe() })
	return &lookups
}

// TestANeverReadySinkIsBoundBeforeItsFirstWake: a Subscription whose sink
// has never been ready (a Function made at zero) has its consumer looked
// up when its worker starts, so that its first wake pays no lookup either:
// the requests for the consumer's info are counted from the moment the
// sink is ready to the event's delivery. Fails when the worker looks the
// consumer up only once the sink is ready.
func TestANeverReadySinkIsBoundBeforeItsFirstWake(t *testing.T) {
	eps := newEndpoints(false)
	b := newBridge(t, withEndpoints(eps))
	k := b.newSink("fn", nil)
	s := sub("s", "fn")
	lookups := countLookups(t, b, s)
	b.subscribe(s)
	require.Eventually(t, func() bool { return lookups.Load() > 0 }, wait, tick, "the consumer is looked up while the sink is not ready")
	b.publish("shop", "order.created.v1", "wake", "")
	lookups.Store(0)
	eps.set(true)
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)
	assert.Zero(t, lookups.Load(), "the consumer was not looked up on the wake's path")
}

func TestOneDeadSinkDoesNotStopOthers(t *testing.T) {
	b := newBridge(t)
	hang := make(chan struct{})
	dead := b.newSink("dead", func(n int, r *http.Request, w http.ResponseWriter) { <-hang })
	t.Cleanup(func() { close(hang) }) // runs before the sink's Close
	healthy := b.newSink("healthy", nil)
	b.subscribe(sub("dead", "dead", config("maxInFlightMessages", "2")))
	b.subscribe(sub("healthy", "healthy"))
	for i := range 50 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return healthy.count() == 50 }, wait, tick)
	assert.Equal(t, 2, dead.count())
}

func TestReplyChaining(t *testing.T) {
	b := newBridge(t)
	b.newSink("enricher", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Ce-Specversion", "1.0")
		w.Header().Set("Ce-Id", "reply-"+r.Header.Get("Ce-Id"))
		w.Header().Set("Ce-Source", "enricher")
		w.Header().Set("Ce-Type", "order.enriched.v1")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"enriched":true}`)
	})
	final := b.newSink("final", nil)
	b.subscribe(sub("enricher", "enricher"))
	b.subscribe(sub("final", "final", func(s *v1alpha2.Subscription) {
		s.Spec.Source = "enricher"
		s.Spec.Types = []string{"order.enriched.v1"}
	}))
	b.publish("shop", "order.created.v1", "o1", "")
	require.Eventually(t, func() bool { return final.count() == 1 }, wait, tick)
	got := final.deliveries()[0]
	assert.Equal(t, "reply-o1", got.header.Get("Ce-Id"))
	assert.Equal(t, "1", got.header.Get("Ce-Kfnhops"))
	assert.JSONEq(t, `{"enriched":true}`, got.body)
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", got.header.Get("Traceparent"), "trace context carried along the chain")
}

func TestReplyLoopIsBounded(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.MaxHops = 3 }))
	// A sink that answers every event with a new event of the type it subscribes to.
	k := b.newSink("echo", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/cloudevents+json")
		fmt.Fprintf(w, `{"specversion":"1.0","id":"echo-%d","source":"shop","type":"order.created.v1"}`, n)
	})
	s := sub("echo", "echo")
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "start", "")
	require.Eventually(t, func() bool { return k.count() == 4 }, wait, tick, "hops 0, 1, 2, 3")
	require.Never(t, func() bool { return k.count() > 4 }, 300*time.Millisecond, tick)
	assert.Equal(t, "3", k.deliveries()[3].header.Get("Ce-Kfnhops"))
	// Replies are counted after their sink answered, which is what the
	// test awaited: the count follows.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_replies_total CloudEvent replies of sinks by result: published, invalid, hop_limit, rate_limited.
# TYPE kfn_eventbridge_replies_total counter
kfn_eventbridge_replies_total{namespace="default",result="hop_limit",subscription="echo"} 1
kfn_eventbridge_replies_total{namespace="default",result="invalid",subscription="echo"} 0
kfn_eventbridge_replies_total{namespace="default",result="published",subscription="echo"} 3
kfn_eventbridge_replies_total{namespace="default",result="rate_limited",subscription="echo"} 0
`), "kfn_eventbridge_replies_total"))
	}, wait, tick)
}

func TestInvalidReplyIsDroppedButDeliverySucceeds(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Ce-Specversion", "1.0") // no id, source, type
		w.WriteHeader(http.StatusOK)
	})
	s := sub("s", "fn")
	b.subscribe(s)
	b.publish("shop", "order.created.v1", "x", "")
	require.Eventually(t, func() bool { return k.count() == 1 && b.consumerInfo(s).NumAckPending == 0 }, wait, tick)
	assert.Empty(t, b.deadLetters())
}

// TestHostileRepliesAreDroppedAndChangeNothing has a sink answer with
// replies the event store refuses: a type that would make NATS close the
// bridge's connection, attributes over their bytes, too many attributes.
// Each delivery counts as done once (a reply that can never be stored is
// no reason to deliver again), the reply is dropped and counted invalid,
// and the next events are still delivered: the connection is up.
func TestHostileRepliesAreDroppedAndChangeNothing(t *testing.T) {
	b := newBridge(t)
	many := ""
	for i := range eventstore.MaxAttributes {
		many += fmt.Sprintf(`,"x%d":"v"`, i)
	}
	replies := map[string]string{
		"long-type": `{"specversion":"1.0","id":"r","source":"fn","type":"` + strings.Repeat("a", 4200) + `"}`,
		"big":       `{"specversion":"1.0","id":"r","source":"fn","type":"a.b","big":"` + strings.Repeat("x", 40<<10) + `"}`,
		"many":      `{"specversion":"1.0","id":"r","source":"fn","type":"a.b"` + many + `}`,
	}
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		if reply, ok := replies[r.Header.Get("Ce-Id")]; ok {
			w.Header().Set("Content-Type", "application/cloudevents+json")
			fmt.Fprint(w, reply)
		}
	})
	s := sub("s", "fn")
	b.subscribe(s)
	for id := range replies {
		b.publish("shop", "order.created.v1", id, "")
	}
	require.Eventually(t, func() bool { return k.count() == len(replies) && b.consumerInfo(s).NumAckPending == 0 }, wait, tick)
	b.publish("shop", "order.created.v1", "after", "")
	require.Eventually(t, func() bool { return k.count() == len(replies)+1 }, wait, tick, "delivered after the hostile replies")
	require.Never(t, func() bool { return k.count() > len(replies)+1 }, 300*time.Millisecond, tick, "nothing delivered twice")
	assert.Empty(t, b.deadLetters())
	require.NoError(t, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_replies_total CloudEvent replies of sinks by result: published, invalid, hop_limit, rate_limited.
# TYPE kfn_eventbridge_replies_total counter
kfn_eventbridge_replies_total{namespace="default",result="hop_limit",subscription="s"} 0
kfn_eventbridge_replies_total{namespace="default",result="invalid",subscription="s"} 3
kfn_eventbridge_replies_total{namespace="default",result="published",subscription="s"} 0
kfn_eventbridge_replies_total{namespace="default",result="rate_limited",subscription="s"} 0
`), "kfn_eventbridge_replies_total"))
}

func TestUpsertRefusesInvalidSubscriptions(t *testing.T) {
	b := newBridge(t)
	err := b.d.Upsert(sub("s", "fn", func(s *v1alpha2.Subscription) { s.Spec.Sink = "http://fn.other.svc.cluster.local" }))
	require.ErrorIs(t, err, v1alpha2.ErrInvalidSink)
	err = b.d.Upsert(sub("s", "fn", config("maxDeliver", "zero")))
	require.ErrorIs(t, err, v1alpha2.ErrInvalidConfig)
	assert.False(t, b.d.Serving("default", "s"))

	require.NoError(t, b.d.Upsert(sub("s", "fn")))
	assert.True(t, b.d.Serving("default", "s"))
	b.d.Remove("default", "s")
	assert.False(t, b.d.Serving("default", "s"))
}

func TestRedeliveryDelay(t *testing.T) {
	d := v1alpha2.Delivery{BackoffInitial: 100 * time.Millisecond, BackoffMax: time.Second}
	assert.Equal(t, 100*time.Millisecond, dispatcher.RedeliveryDelay(d, 1, 0, 0))
	assert.Equal(t, 400*time.Millisecond, dispatcher.RedeliveryDelay(d, 3, 0, 0))
	assert.Equal(t, 5*time.Second, dispatcher.RedeliveryDelay(d, 3, 0, 5*time.Second), "Retry-After wins when longer")
	// ±20% of 200ms at random: each delay within 160-240ms, and 100 of
	// them spread beyond ±5% both ways (all 100 on one side of it by chance:
	// under 1e-20), so that retries of events that failed together part.
	low, high := time.Hour, time.Duration(0)
	for range 100 {
		got := dispatcher.RedeliveryDelay(d, 2, 0.2, 0)
		assert.GreaterOrEqual(t, got, 160*time.Millisecond)
		assert.LessOrEqual(t, got, 240*time.Millisecond)
		low, high = min(low, got), max(high, got)
	}
	assert.Less(t, low, 190*time.Millisecond, "jitter shortens some delays")
	assert.Greater(t, high, 210*time.Millisecond, "jitter lengthens some delays")
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		in   string
		want time.Duration
	}{
		"absent":   {"", 0},
		"seconds":  {"3", 3 * time.Second},
		"date":     {"Thu, 01 Jan 2026 00:00:10 GMT", 10 * time.Second},
		"past":     {"Wed, 31 Dec 2025 00:00:00 GMT", 0},
		"negative": {"-5", 0},
		"garbage":  {"soon", 0},
		"capped":   {"86400", dispatcher.MaxRetryAfter},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tt.want, dispatcher.RetryAfter(tt.in, now)) })
	}
}

func TestSlowSinkKeepsItsEvent(t *testing.T) {
	b := newBridge(t)
	k := b.newSink("slow", func(n int, r *http.Request, w http.ResponseWriter) { time.Sleep(1500 * time.Millisecond) })
	s := sub("s", "slow")
	b.subscribeAckWait(s, 400*time.Millisecond)
	b.publish("shop", "order.created.v1", "x", "")
	require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 && k.count() == 1 }, wait, tick)
	assert.Zero(t, b.consumerInfo(s).NumRedelivered, "in-progress signals kept the event while the sink worked past the ack wait")
	assert.Equal(t, 1, k.count())
}

// TestReadinessNoiseLosesNoPulledEvent sends readiness notifications that
// do not change the answer (as when another Service's endpoints change)
// while events flow through a slow sink: events the dispatcher had already
// pulled must still be delivered at once, not left for the ack wait (30s).
func TestReadinessNoiseLosesNoPulledEvent(t *testing.T) {
	eps := newEndpoints(true)
	b := newBridge(t, withEndpoints(eps))
	k := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		time.Sleep(2 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	})
	b.subscribeAckWait(sub("s", "fn", config("maxInFlightMessages", "10")), 30*time.Second)
	stop := make(chan struct{})
	noise := make(chan struct{})
	go func() {
		defer close(noise)
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
				eps.set(true)
			}
		}
	}()
	for i := range 200 {
		b.publish("shop", "order.created.v1", strconv.Itoa(i), "")
	}
	require.Eventually(t, func() bool { return k.count() >= 200 }, wait, tick, "delivered %d of 200 within %s", k.count(), wait)
	close(stop)
	<-noise
}

// A sink that answers with a 307 or 308 redirect has it followed: the
// event goes again, body and CloudEvent headers, to where it points, and
// that answer is the attempt's. A 302 (which http.Client would follow with
// a GET, without the event) is the sink's answer: a 3xx, given up.
func TestRedirects(t *testing.T) {
	tests := map[string]struct {
		status    int
		delivered bool
	}{
		"307 Temporary Redirect is followed": {status: http.StatusTemporaryRedirect, delivered: true},
		"308 Permanent Redirect is followed": {status: http.StatusPermanentRedirect, delivered: true},
		"302 Found is an answer":             {status: http.StatusFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBridge(t)
			k := b.newSink("fn", func(_ int, r *http.Request, w http.ResponseWriter) {
				if r.URL.Path != "/moved" {
					w.Header().Set("Location", "/moved")
					w.WriteHeader(tc.status)
				}
			})
			s := sub("s", "fn")
			b.subscribe(s)
			b.publish("shop", "order.created.v1", "e1", "hello")
			require.Eventually(t, func() bool { return b.consumerInfo(s).NumAckPending == 0 && b.consumerInfo(s).NumPending == 0 }, wait, tick)
			if !tc.delivered {
				require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick)
				assert.Equal(t, 1, k.count(), "sent once, not followed")
				return
			}
			require.Eventually(t, func() bool { return k.count() == 2 }, wait, tick)
			moved := k.deliveries()[1]
			assert.Equal(t, "/moved", moved.path)
			assert.Equal(t, "hello", moved.body)
			assert.Equal(t, "e1", moved.header.Get("Ce-Id"))
			assert.Equal(t, "order.created.v1", moved.header.Get("Ce-Type"))
			assert.Empty(t, b.deadLetters())
		})
	}
}

// TestInvalidSubscriptionHoldsItsEventsWithinItsBudget: a served
// Subscription whose spec becomes invalid (a sink in another namespace,
// then a spec.config that cannot be read) delivers nothing while it is,
// its consumer's events wait, and past its maxBacklog the oldest are
// dead-lettered with the reason; once it is valid again the events left
// are delivered.
func TestInvalidSubscriptionHoldsItsEventsWithinItsBudget(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) { c.BudgetInterval = 50 * time.Millisecond }))
	k := b.newSink("fn", nil)
	valid := sub("s", "fn", config("maxBacklog", "10", "maxInFlightMessages", "1"))
	b.subscribe(valid)
	b.publish("shop", "order.created.v1", "before", "")
	require.Eventually(t, func() bool { return k.count() == 1 }, wait, tick)

	elsewhere := sub("s", "fn", config("maxBacklog", "2", "maxInFlightMessages", "1"), func(s *v1alpha2.Subscription) {
		s.Spec.Sink = "http://fn.other.svc.cluster.local/events"
	})
	require.ErrorIs(t, b.d.Upsert(elsewhere), v1alpha2.ErrInvalidSink)
	assert.True(t, b.d.Holding("default", "s"))
	assert.False(t, b.d.Serving("default", "s"))
	for _, id := range []string{"1", "2", "3"} {
		b.publish("shop", "order.created.v1", id, "")
	}
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 1 }, wait, tick, "one over its maxBacklog of 2")
	letter := b.deadLetters()[0]
	assert.Equal(t, "1", eventstore.Attribute(letter.Headers(), "id"), "the oldest")
	assert.Contains(t, letter.Headers().Get("Kfn-Error"), "the Subscription's spec has errors")
	assert.Contains(t, letter.Headers().Get("Kfn-Error"), "must be in the Subscription's namespace")
	assert.Equal(t, 1, k.count(), "nothing delivered while invalid")

	unreadable := sub("s", "fn", config("maxDeliver", "zero"))
	require.ErrorIs(t, b.d.Upsert(unreadable), v1alpha2.ErrInvalidConfig)
	assert.True(t, b.d.Holding("default", "s"))
	b.publish("shop", "order.created.v1", "4", "")
	require.Eventually(t, func() bool { return len(b.deadLetters()) == 2 }, wait, tick,
		"held within the last budget it had (2): the oldest of the three waiting goes")
	require.Never(t, func() bool { return k.count() > 1 || len(b.deadLetters()) > 2 }, 300*time.Millisecond, tick, "no more")

	require.NoError(t, b.d.Upsert(valid))
	require.Eventually(t, func() bool { return k.count() == 3 }, wait, tick, "the events held are delivered")
	var got []string
	for _, d := range k.deliveries()[1:] {
		got = append(got, d.header.Get("Ce-Id"))
	}
	assert.Equal(t, []string{"3", "4"}, got)
}
