package subscription_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
)

// limited reports whether the Subscription ns/name is not active for its
// namespace's limits, and the condition's message.
func (e *env) limited(ns, name string) (bool, string) {
	var s v1alpha2.Subscription
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return false, ""
	}
	c := s.Status.FindCondition(v1alpha2.ConditionSubscriptionActive)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha2.ReasonNamespaceLimit {
		return false, ""
	}
	return !s.Status.Ready, c.Message
}

// readyIn reports whether the Subscription ns/name is ready.
func (e *env) readyIn(ns, name string) bool {
	var s v1alpha2.Subscription
	return e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s) == nil && s.Status.Ready
}

// hasConsumer reports whether the Subscription ns/name has a consumer.
func (e *env) hasConsumer(ns, name string) bool {
	_, err := e.js.Consumer(context.Background(), e.streams.EventStream, stream.ConsumerName(ns, name))
	return err == nil
}

// namespace makes another namespace with a Service fn.
func (e *env) namespace(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, e.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.NoError(t, e.c.Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fn"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}))
}

// TestOneNamespaceCannotTakeEveryConsumer: the event stream takes 8
// consumers (the last 2 kept for namespaces' first Subscriptions, see
// TestTheStreamsLastConsumersAreKeptForEveryNamespacesFirst), and a
// namespace may have 3. The attacker's first three Subscriptions get
// theirs; its fourth and fifth are not active, with the reason, and get
// none; the victim's Subscription, in another namespace, gets its
// consumer. Without the namespace's cap the attacker's fourth and fifth
// got consumers. When one of the attacker's Subscriptions is deleted, the
// next in line gets its consumer.
func TestOneNamespaceCannotTakeEveryConsumer(t *testing.T) {
	e := newEnvWith(t, func(c *stream.Config, r *subscription.Reconciler) {
		c.MaxConsumers = 8
		r.Applier.Limits.MaxConsumersPerNamespace = 3
	})
	e.service(t, "fn")
	for i := range 5 {
		e.subscription(t, fmt.Sprintf("s%d", i), "fn")
	}
	for i := range 3 {
		name := fmt.Sprintf("s%d", i)
		require.Eventually(t, func() bool { return e.status(name).Ready }, wait, tick, name)
	}
	// The attacker's fourth is settled, one way or the other, before the
	// victim comes.
	require.Eventually(t, func() bool {
		limited, _ := e.limited(e.ns, "s3")
		return limited || e.hasConsumer(e.ns, "s3")
	}, wait, tick)

	victim := e.ns + "-victim"
	e.namespace(t, victim)
	e.subscription(t, "orders", "fn", func(s *v1alpha2.Subscription) {
		s.Namespace = victim
		s.Spec.Sink = fmt.Sprintf("http://fn.%s.svc.cluster.local", victim)
	})
	require.Eventually(t, func() bool { return e.readyIn(victim, "orders") }, wait, tick, "the other namespace's Subscription gets its consumer")
	assert.True(t, e.hasConsumer(victim, "orders"))

	for _, name := range []string{"s3", "s4"} {
		require.Eventually(t, func() bool { limited, _ := e.limited(e.ns, name); return limited }, wait, tick, name)
		_, msg := e.limited(e.ns, name)
		assert.Contains(t, msg, fmt.Sprintf("Subscriptions of namespace %s were made before this one, and a namespace may have 3 with a consumer", e.ns))
		assert.False(t, e.hasConsumer(e.ns, name), name)
	}

	require.NoError(t, e.c.Delete(context.Background(), e.get(t, "s0")))
	require.Eventually(t, func() bool { return e.status("s3").Ready }, wait, tick, "the next in line gets the freed place")
	limited, _ := e.limited(e.ns, "s4")
	assert.True(t, limited, "and no more")
}

// TestSubscriptionsPerEventType: a namespace may have 2 Subscriptions per
// event type, so that one publish cannot turn into hundreds of deliveries
// for it: the third on order.created.v1 gets no consumer, with the
// reason; one on another type does.
func TestSubscriptionsPerEventType(t *testing.T) {
	e := newEnvWith(t, func(_ *stream.Config, r *subscription.Reconciler) { r.Applier.Limits.MaxSubscriptionsPerType = 2 })
	e.service(t, "fn")
	created := func(s *v1alpha2.Subscription) { s.Spec.Types = []string{"order.created.v1"} }
	for _, name := range []string{"a", "b", "c"} {
		e.subscription(t, name, "fn", created)
	}
	e.subscription(t, "other", "fn", func(s *v1alpha2.Subscription) { s.Spec.Types = []string{"order.paid.v1"} })
	for _, name := range []string{"a", "b", "other"} {
		require.Eventually(t, func() bool { return e.status(name).Ready }, wait, tick, name)
	}
	require.Eventually(t, func() bool { limited, _ := e.limited(e.ns, "c"); return limited }, wait, tick)
	_, msg := e.limited(e.ns, "c")
	assert.Contains(t, msg, "2 Subscriptions of namespace "+e.ns+" made before this one receive kyma.shop.order.created.v1")
	assert.False(t, e.hasConsumer(e.ns, "c"))
}

// reserveEnv is a stream of 8 consumers, 4 for each namespace (the last 2
// kept for namespaces holding none), whose first namespace (e.ns) holds 4
// with Subscriptions s0 to s3, and a second namespace with a Service fn;
// tweak changes the reconciler.
func reserveEnv(t *testing.T, tweak func(*subscription.Reconciler)) (e *env, second string) {
	t.Helper()
	e = newEnvWith(t, func(c *stream.Config, r *subscription.Reconciler) {
		c.MaxConsumers = 8
		r.Applier.Limits.MaxConsumersPerNamespace = 4
		tweak(r)
	})
	e.service(t, "fn")
	for i := range 4 {
		e.subscription(t, fmt.Sprintf("s%d", i), "fn")
		require.Eventually(t, func() bool { return e.status(fmt.Sprintf("s%d", i)).Ready }, wait, tick)
	}
	second = e.ns + "-b"
	e.namespace(t, second)
	return e, second
}

// in puts a Subscription in namespace ns, its sink the Service fn there.
func in(ns string) func(*v1alpha2.Subscription) {
	return func(s *v1alpha2.Subscription) {
		s.Namespace = ns
		s.Spec.Sink = fmt.Sprintf("http://fn.%s.svc.cluster.local", ns)
	}
}

// TestTheStreamsLastConsumersAreKeptForEveryNamespacesFirst: the event
// stream takes 8 consumers, a namespace may have 4, so the last 2 go only
// to namespaces holding none. Two namespaces at their limit take
// 6 (the first four of one, the first two of the other), and the
// Subscriptions past them wait, with the reason; a third namespace's first
// Subscription still gets its consumer (without the reserve the two took
// all 8 and NATS refused it). A Subscription that has its consumer keeps
// it, and one that waits gets its consumer once the stream has room again.
func TestTheStreamsLastConsumersAreKeptForEveryNamespacesFirst(t *testing.T) {
	e, second := reserveEnv(t, func(*subscription.Reconciler) {})
	victim := e.ns + "-victim"
	settled := func(ns, name string) {
		t.Helper()
		require.Eventually(t, func() bool {
			limited, _ := e.limited(ns, name)
			return limited || e.readyIn(ns, name)
		}, wait, tick, "%s/%s", ns, name)
	}
	for i := range 4 {
		e.subscription(t, fmt.Sprintf("b%d", i), "fn", in(second))
		settled(second, fmt.Sprintf("b%d", i))
	}
	e.namespace(t, victim)
	e.subscription(t, "orders", "fn", in(victim))
	require.Eventually(t, func() bool { return e.readyIn(victim, "orders") }, wait, tick, "the third namespace's first Subscription gets its consumer")

	for i := range 4 {
		assert.True(t, e.readyIn(e.ns, fmt.Sprintf("s%d", i)), "s%d", i)
	}
	assert.True(t, e.readyIn(second, "b0"))
	assert.True(t, e.readyIn(second, "b1"), "the 6th consumer is within the part anyone may take")
	for _, name := range []string{"b2", "b3"} {
		limited, msg := e.limited(second, name)
		assert.True(t, limited, name)
		assert.Contains(t, msg, "the event stream holds 6 consumers of its 8: the last 2 are kept for namespaces holding fewer than 1", name)
		assert.False(t, e.hasConsumer(second, name), name)
	}
	e.subscription(t, "payments", "fn", in(victim))
	require.Eventually(t, func() bool { limited, _ := e.limited(victim, "payments"); return limited }, wait, tick, "the reserve is for a namespace's first Subscriptions only")

	// Resyncs (every 300 ms here) pass: b1 keeps the consumer it has.
	require.Never(t, func() bool { return !e.readyIn(second, "b1") || !e.hasConsumer(second, "b1") }, time.Second, tick, "a Subscription keeps its consumer")

	// Two consumers freed: the stream holds 5, and one of those waiting
	// gets the 6th at its next resync; the others wait on.
	require.NoError(t, e.c.Delete(context.Background(), e.get(t, "s0")))
	require.NoError(t, e.c.Delete(context.Background(), e.get(t, "s1")))
	waiting := func() int {
		n := 0
		for _, s := range [][2]string{{second, "b2"}, {second, "b3"}, {victim, "payments"}} {
			if e.readyIn(s[0], s[1]) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return waiting() == 1 }, wait, tick, "the stream has room again: one that waited gets its consumer")
	require.Never(t, func() bool { return waiting() > 1 }, time.Second, tick, "and only one")
}

// TestTheReserveByDefault: of the default 10,000 consumers, the last
// 2,500 go to namespaces holding fewer than 25 (a quarter of their 100):
// a namespace holding 25 waits from 7,500 on, one holding 24 never does.
func TestTheReserveByDefault(t *testing.T) {
	streams, l := stream.DefaultConfig(), subscription.Limits{}
	sub := &v1alpha2.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}}
	for _, c := range []struct {
		held, total int
		waits       bool
	}{
		{held: 0, total: 9_999},
		{held: 24, total: 9_999},
		{held: 25, total: 7_499},
		{held: 25, total: 7_500, waits: true},
		{held: 99, total: 9_000, waits: true},
	} {
		assert.Equal(t, c.held >= 25, l.NeedsRoom(c.held, streams), "%d held", c.held)
		err := l.Reserve(sub, c.held, c.total, streams)
		if !c.waits {
			assert.NoError(t, err, "%d held, %d in all", c.held, c.total)
			continue
		}
		require.ErrorIs(t, err, subscription.ErrNamespaceLimit, "%d held, %d in all", c.held, c.total)
		require.ErrorIs(t, err, subscription.ErrStreamReserve)
		assert.Contains(t, err.Error(), fmt.Sprintf("namespace shop holds %d consumers, and the event stream holds %d consumers of its 10000: the last 2500 are kept for namespaces holding fewer than 25", c.held, c.total))
	}
}

// TestAWaitingSubscriptionGetsTheRoomAtOnce: a Subscription waiting for
// room in the event stream gets its consumer as soon as another
// namespace's Subscription is deleted, not at its next resync (an hour
// here).
func TestAWaitingSubscriptionGetsTheRoomAtOnce(t *testing.T) {
	e, second := reserveEnv(t, func(r *subscription.Reconciler) { r.Resync = time.Hour })
	for i := range 3 {
		e.subscription(t, fmt.Sprintf("b%d", i), "fn", in(second))
	}
	require.Eventually(t, func() bool {
		limited, msg := e.limited(second, "b2")
		return e.readyIn(second, "b0") && e.readyIn(second, "b1") && limited && strings.Contains(msg, "the event stream holds 6 consumers of its 8")
	}, wait, tick, "b2 waits for room")

	require.NoError(t, e.c.Delete(context.Background(), e.get(t, "s0")))
	require.Eventually(t, func() bool { return e.readyIn(second, "b2") }, 10*time.Second, tick, "the room s0 left goes to b2 at once")
}

// TestTheReserveCountsConsumersHeldNotPlaces: the event stream takes 8
// consumers, a namespace may have 4, the last 2 are kept for namespaces
// holding none. A namespace whose first Subscription has no consumer (its
// spec invalid) while its next two take the room to spare does not get
// the reserve for the first once its spec is fixed: it holds two
// consumers. Counted by places, the first was a namespace's first and got
// one, and a hundred namespaces doing so took the whole reserve.
func TestTheReserveCountsConsumersHeldNotPlaces(t *testing.T) {
	e, second := reserveEnv(t, func(*subscription.Reconciler) {})
	e.subscription(t, "b0", "fn", in(second), func(s *v1alpha2.Subscription) {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "100", "maxBacklog": "10"}
	})
	require.Eventually(t, func() bool {
		var s v1alpha2.Subscription
		return e.c.Get(context.Background(), client.ObjectKey{Namespace: second, Name: "b0"}, &s) == nil && len(s.Status.Conditions) > 0
	}, wait, tick, "b0 is looked at")
	assert.False(t, e.hasConsumer(second, "b0"), "an invalid spec gets no consumer")
	for _, name := range []string{"b1", "b2"} {
		e.subscription(t, name, "fn", in(second))
		require.Eventually(t, func() bool { return e.readyIn(second, name) }, wait, tick, name)
	}

	var b0 v1alpha2.Subscription
	require.NoError(t, e.c.Get(context.Background(), client.ObjectKey{Namespace: second, Name: "b0"}, &b0))
	b0.Spec.Config = nil
	require.NoError(t, e.c.Update(context.Background(), &b0))
	require.Eventually(t, func() bool { limited, _ := e.limited(second, "b0"); return limited }, wait, tick, "b0 waits: its namespace holds two")
	_, msg := e.limited(second, "b0")
	assert.Contains(t, msg, "namespace "+second+" holds 2 consumers, and the event stream holds 6 consumers of its 8")
	assert.False(t, e.hasConsumer(second, "b0"))
}
