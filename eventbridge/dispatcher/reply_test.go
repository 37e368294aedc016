package dispatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// TestRepliesArePublishedByTheSubscriptionsNamespace has the sink of a
// Subscription of namespace tenant answer with replies that, taken as
// they come, would pass for another namespace's events: one that names
// its sender itself, one of a source reserved to namespace bank, and one
// with the source and id of bank's next event (which JetStream's
// de-duplication would then drop). A reply is a publish by its
// Subscription's namespace: stamped with it, the first two dropped and
// counted invalid, and bank's event stored and delivered beside the
// tenant's look-alike.
func TestRepliesArePublishedByTheSubscriptionsNamespace(t *testing.T) {
	b := newBridge(t, withConfig(func(c *dispatcher.Config) {
		c.Reserved = []admission.Reservation{{Source: "bank", Namespaces: []string{"bank"}}}
	}))
	replies := map[string]string{ // by the id of the event answered
		"plain":     `{"specversion":"1.0","id":"r1","source":"fn","type":"reply.v1"}`,
		"forged":    `{"specversion":"1.0","id":"r2","source":"fn","type":"reply.v1","kfnsendernamespace":"bank"}`,
		"reserved":  `{"specversion":"1.0","id":"r3","source":"bank","type":"reply.v1"}`,
		"predicted": `{"specversion":"1.0","id":"pay-1","source":"payments","type":"reply.v1"}`,
	}
	b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/cloudevents+json")
		fmt.Fprint(w, replies[r.Header.Get("Ce-Id")])
	})
	watch := func(name, source string) *sink {
		k := b.newSink(name, nil)
		b.subscribe(sub(name, name, func(s *v1alpha2.Subscription) {
			s.Spec.Source, s.Spec.Types = source, []string{"reply.v1"}
		}))
		return k
	}
	fromFn, fromBank, fromPayments := watch("from-fn", "fn"), watch("from-bank", "bank"), watch("from-payments", "payments")
	b.subscribe(sub("s", "fn", func(s *v1alpha2.Subscription) {
		s.Namespace, s.Spec.Sink = "tenant", "http://fn.tenant.svc.cluster.local/events"
	}))
	for id := range replies {
		b.publish("shop", "order.created.v1", id, "")
	}
	require.Eventually(t, func() bool { return fromFn.count() == 1 && fromPayments.count() == 1 }, wait, tick)

	// bank's own event, of the id the tenant predicted.
	e := event.New()
	e.SetID("pay-1")
	e.SetSource("payments")
	e.SetType("reply.v1")
	e.SetExtension(eventstore.SenderExtension, "bank")
	_, err := put(context.Background(), b.store, &e, "", "")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fromPayments.count() == 2 }, wait, tick, "bank's event is not taken for the tenant's")
	require.Never(t, func() bool { return fromFn.count() > 1 || fromBank.count() > 0 }, 300*time.Millisecond, tick)

	assert.Equal(t, "r1", fromFn.deliveries()[0].header.Get("Ce-Id"))
	assert.Equal(t, "tenant", fromFn.deliveries()[0].header.Get("Ce-Kfnsendernamespace"), "a reply names its Subscription's namespace")
	var senders []string
	for _, d := range fromPayments.deliveries() {
		senders = append(senders, d.header.Get("Ce-Kfnsendernamespace"))
	}
	assert.ElementsMatch(t, []string{"tenant", "bank"}, senders)
	// Replies are counted after their sink answered, which is what the
	// test awaited: the count follows.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, testutil.GatherAndCompare(b.reg, strings.NewReader(`
# HELP kfn_eventbridge_replies_total CloudEvent replies of sinks by result: published, invalid, hop_limit, rate_limited.
# TYPE kfn_eventbridge_replies_total counter
kfn_eventbridge_replies_total{namespace="default",result="hop_limit",subscription="from-bank"} 0
kfn_eventbridge_replies_total{namespace="default",result="hop_limit",subscription="from-fn"} 0
kfn_eventbridge_replies_total{namespace="default",result="hop_limit",subscription="from-payments"} 0
kfn_eventbridge_replies_total{namespace="default",result="invalid",subscription="from-bank"} 0
kfn_eventbridge_replies_total{namespace="default",result="invalid",subscription="from-fn"} 0
kfn_eventbridge_replies_total{namespace="default",result="invalid",subscription="from-payments"} 0
kfn_eventbridge_replies_total{namespace="default",result="published",subscription="from-bank"} 0
kfn_eventbridge_replies_total{namespace="default",result="published",subscription="from-fn"} 0
kfn_eventbridge_replies_total{namespace="default",result="published",subscription="from-payments"} 0
kfn_eventbridge_replies_total{namespace="default",result="rate_limited",subscription="from-bank"} 0
kfn_eventbridge_replies_total{namespace="default",result="rate_limited",subscription="from-fn"} 0
kfn_eventbridge_replies_total{namespace="default",result="rate_limited",subscription="from-payments"} 0
kfn_eventbridge_replies_total{namespace="tenant",result="hop_limit",subscription="s"} 0
kfn_eventbridge_replies_total{namespace="tenant",result="invalid",subscription="s"} 2
kfn_eventbridge_replies_total{namespace="tenant",result="published",subscription="s"} 2
kfn_eventbridge_replies_total{namespace="tenant",result="rate_limited",subscription="s"} 0
`), "kfn_eventbridge_replies_total"))
	}, wait, tick)
}

// TestRepliesTakeTheirNamespacesRate has the sink of namespace tenant's
// Subscription answer each of five events with a reply, its namespace's
// rate being 3 events at once and one every 2 s. A reply is an event the
// namespace stores: the first three are stored at once, the others each
// when the rate lets it, their deliveries waiting for that (not failed, so
// not retried nor dead-lettered with the default maxDeliver), each reply
// once; and the namespace's bucket, the one its publishes take from
// (publisher.WithRates), is then empty while another namespace's is not.
func TestRepliesTakeTheirNamespacesRate(t *testing.T) {
	rates := admission.NewRates(0.5, 3, 0, 0)
	b := newBridge(t, withOption(dispatcher.WithReplyRates(rates)))
	fn := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/cloudevents+json")
		fmt.Fprintf(w, `{"specversion":"1.0","id":"re-%s","source":"fn","type":"reply.v1"}`, r.Header.Get("Ce-Id"))
	})
	replies := b.newSink("replies", nil)
	b.subscribe(sub("replies", "replies", func(s *v1alpha2.Subscription) {
		s.Spec.Source, s.Spec.Types = "fn", []string{"reply.v1"}
	}))
	b.subscribe(sub("s", "fn", func(s *v1alpha2.Subscription) {
		s.Namespace, s.Spec.Sink = "tenant", "http://fn.tenant.svc.cluster.local/events"
	}))
	for i := range 5 {
		b.publish("shop", "order.created.v1", fmt.Sprint("o", i), "")
	}
	require.Eventually(t, func() bool { return replies.count() == 3 }, wait, tick, "the burst's replies are stored")
	require.Never(t, func() bool { return replies.count() > 3 }, 500*time.Millisecond, tick, "no reply past the namespace's rate")
	require.ErrorIs(t, rates.Take("tenant", 1), admission.ErrTooManyEvents, "the namespace's publishes share the bucket its replies emptied")
	require.NoError(t, rates.Take("other", 1), "another namespace's bucket is its own")

	require.Eventually(t, func() bool { return replies.count() == 5 }, 3*wait, tick, "every reply is stored in its turn")
	ids := map[string]bool{}
	for _, d := range replies.deliveries() {
		ids[d.header.Get("Ce-Id")] = true
	}
	assert.Len(t, ids, 5, "each event's reply once")
	assert.Equal(t, 5, fn.count(), "each event delivered once: a reply waiting for its turn fails no attempt")
	assert.Zero(t, b.gauge("kfn_eventbridge_delivery_failures_total", map[string]string{"namespace": "tenant", "subscription": "s"}))
	assert.Zero(t, b.gauge("kfn_eventbridge_replies_total", map[string]string{"namespace": "tenant", "subscription": "s", "result": "rate_limited"}))
	assert.Empty(t, b.deadLetters())
}

// TestAReplyTooFarPastItsRateIsRetried: a namespace whose next event its
// rate allows only in 100 s (more than reply.MaxRateWait) has its
// sink's reply refused (counted rate_limited) and the delivery retried,
// not lost.
func TestAReplyTooFarPastItsRateIsRetried(t *testing.T) {
	rates := admission.NewRates(0.01, 1, 0, 0)
	require.NoError(t, rates.Take("tenant", 1)) // the bucket empty: the next event in 100 s
	b := newBridge(t, withOption(dispatcher.WithReplyRates(rates)))
	fn := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/cloudevents+json")
		fmt.Fprint(w, `{"specversion":"1.0","id":"re","source":"fn","type":"reply.v1"}`)
	})
	b.subscribe(sub("s", "fn", config("backoffInitial", "10ms", "backoffMax", "10ms"), func(s *v1alpha2.Subscription) {
		s.Namespace, s.Spec.Sink = "tenant", "http://fn.tenant.svc.cluster.local/events"
	}))
	b.publish("shop", "order.created.v1", "o", "")
	require.Eventually(t, func() bool {
		return b.gauge("kfn_eventbridge_replies_total", map[string]string{"namespace": "tenant", "subscription": "s", "result": "rate_limited"}) >= 1
	}, wait, tick, "the reply is refused, counted")
	require.Eventually(t, func() bool { return fn.count() >= 2 }, wait, tick, "and the delivery retried")
	assert.Empty(t, b.deadLetters())
}

// TestARepliesBytesTakeTheirNamespacesRate: a namespace whose bytes its
// rate allows only 100 a second, in bursts of 2,000, has its sink's reply
// of about 3,000 bytes refused (counted rate_limited) and the delivery
// retried, while its replies of a few bytes are stored: a reply's bytes
// are the namespace's, as its publishes' are.
func TestARepliesBytesTakeTheirNamespacesRate(t *testing.T) {
	rates := admission.NewRates(1000, 1000, 0, 0)
	rates.LimitBytes(100, 2000, 0, 0)
	b := newBridge(t, withOption(dispatcher.WithReplyRates(rates)))
	large := strings.Repeat("x", 3000)
	fn := b.newSink("fn", func(n int, r *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/cloudevents+json")
		data := "small"
		if r.Header.Get("Ce-Id") == "large" {
			data = large
		}
		fmt.Fprintf(w, `{"specversion":"1.0","id":"re-%s","source":"fn","type":"reply.v1","data":%q}`, r.Header.Get("Ce-Id"), data)
	})
	replies := b.newSink("replies", nil)
	b.subscribe(sub("replies", "replies", func(s *v1alpha2.Subscription) {
		s.Spec.Source, s.Spec.Types = "fn", []string{"reply.v1"}
	}))
	b.subscribe(sub("s", "fn", config("backoffInitial", "10ms", "backoffMax", "10ms"), func(s *v1alpha2.Subscription) {
		s.Namespace, s.Spec.Sink = "tenant", "http://fn.tenant.svc.cluster.local/events"
	}))
	b.publish("shop", "order.created.v1", "large", "")
	require.Eventually(t, func() bool {
		return b.gauge("kfn_eventbridge_replies_total", map[string]string{"namespace": "tenant", "subscription": "s", "result": "rate_limited"}) >= 1
	}, wait, tick, "the large reply is refused, counted")
	require.Eventually(t, func() bool { return fn.count() >= 2 }, wait, tick, "and its delivery retried")
	b.publish("shop", "order.created.v1", "small", "")
	require.Eventually(t, func() bool {
		for _, d := range replies.deliveries() {
			if d.header.Get("Ce-Id") == "re-small" {
				return true
			}
		}
		return false
	}, wait, tick, "a small reply is stored")
	for _, d := range replies.deliveries() {
		assert.NotEqual(t, "re-large", d.header.Get("Ce-Id"), "the reply past the namespace's bytes is not stored")
	}
}
