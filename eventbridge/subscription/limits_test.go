package subscription_test

import (
	"context"
	"fmt"
	"testing"

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

// TestOneNamespaceCannotTakeEveryConsumer: the event stream takes 4
// consumers, and a namespace may have 3. The attacker's first three
// Subscriptions get theirs; its fourth and fifth are not active, with the
// reason, and get none; the victim's Subscription, in another namespace,
// gets the stream's last consumer. Without the namespace's cap the
// attacker took all 4 and the victim's consumer was refused. When one of
// the attacker's Subscriptions is deleted, the next in line gets its
// consumer.
func TestOneNamespaceCannotTakeEveryConsumer(t *testing.T) {
	e := newEnvWith(t, func(c *stream.Config, r *subscription.Reconciler) {
		c.MaxConsumers = 4
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
