package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/test/natstest"
)

// setEnv is a Set on an embedded NATS with two recording targets, as kfn
// dev has a dispatcher and a scaler.
type setEnv struct {
	nats    *natstest.Server
	js      jetstream.JetStream
	streams stream.Config
	set     *subscription.Set
	targets [2]*targets
}

func newSetEnv(t *testing.T) *setEnv {
	t.Helper()
	e := &setEnv{nats: natstest.Start(t), streams: stream.DefaultConfig()}
	e.js = e.nats.JetStream()
	e.streams.Storage = stream.StorageMemory
	require.NoError(t, jsstream.Ensure(context.Background(), e.js, e.streams))
	for i := range e.targets {
		e.targets[i] = &targets{serving: map[string]*v1alpha2.Subscription{}}
	}
	e.set = subscription.NewSet(subscription.Applier{JetStream: e.js, Streams: e.streams}, e.targets[0], e.targets[1])
	return e
}

func (e *setEnv) hasConsumer(t *testing.T, ns, name string) bool {
	t.Helper()
	_, err := e.js.Consumer(context.Background(), e.streams.EventStream, stream.ConsumerName(ns, name))
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// served reports whether the Subscription has a consumer and both targets
// serve it.
func (e *setEnv) served(t *testing.T, ns, name string) bool {
	t.Helper()
	c := e.hasConsumer(t, ns, name)
	assert.Equal(t, c, e.targets[0].has(ns, name), "dispatcher agrees with JetStream about %s/%s", ns, name)
	assert.Equal(t, c, e.targets[1].has(ns, name), "scaler agrees with JetStream about %s/%s", ns, name)
	return c
}

func sub(ns, name, sink string) *v1alpha2.Subscription {
	return &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha2.SubscriptionSpec{Sink: sink, Source: "shop", Types: []string{"order.created.v1"}},
	}
}

func TestSetServesExactlyTheSetGiven(t *testing.T) {
	e := newSetEnv(t)
	ctx := context.Background()
	orders := sub("shop", "orders", "http://orders.shop.svc.cluster.local")
	audit := sub("shop", "audit", "http://audit.shop.svc.cluster.local")
	errs := e.set.Apply(ctx, []*v1alpha2.Subscription{orders, audit})
	require.Empty(t, errs)
	assert.True(t, e.served(t, "shop", "orders"))
	assert.True(t, e.served(t, "shop", "audit"))
	listed, err := e.set.ListSubscriptions(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	assert.Equal(t, []string{"audit", "orders"}, []string{listed[0].Name, listed[1].Name}, "sorted")

	// A smaller set: the one left out loses its consumer and its targets.
	require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{orders}))
	assert.True(t, e.served(t, "shop", "orders"))
	assert.False(t, e.served(t, "shop", "audit"))
	assert.Len(t, e.set.Subscriptions(), 1)

	require.Empty(t, e.set.Apply(ctx, nil))
	assert.False(t, e.served(t, "shop", "orders"))
	assert.Empty(t, e.set.Subscriptions())
}

// TestSetKeepsTheEventsOfWhatItCannotServe applies a Subscription that was
// served and then cannot be (a sink in another namespace, a config value
// that cannot be read, a target that refuses it): the error names it, its
// consumer stays with the events that wait in it, and the targets that
// can hold it keep it; serving it again delivers them. Only leaving it
// out of the set deletes the consumer.
func TestSetKeepsTheEventsOfWhatItCannotServe(t *testing.T) {
	tests := map[string]struct {
		bad     *v1alpha2.Subscription
		refuse  bool // the second target refuses it
		wantErr string
	}{
		"sink in another namespace": {
			bad:     sub("shop", "bad", "http://fn.kube-system.svc.cluster.local"),
			wantErr: "Subscription shop/bad: spec.sink: ",
		},
		"bad config value": {
			bad: func() *v1alpha2.Subscription {
				s := sub("shop", "bad", "http://fn.shop.svc.cluster.local")
				s.Spec.Config = map[string]v1alpha2.ConfigValue{"maxInFlightMessages": "zero"}
				return s
			}(),
			wantErr: "Subscription shop/bad: ",
		},
		"a target refuses it": {
			bad:     sub("shop", "bad", "http://fn.shop.svc.cluster.local"),
			refuse:  true,
			wantErr: "Subscription shop/bad: refused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newSetEnv(t)
			ctx := context.Background()
			good := sub("shop", "good", "http://fn.shop.svc.cluster.local")
			valid := sub("shop", "bad", "http://fn.shop.svc.cluster.local")
			require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{good, valid}))
			require.True(t, e.served(t, "shop", "bad"))
			_, err := e.js.Publish(ctx, "kyma.shop.order.created.v1", []byte("{}"))
			require.NoError(t, err)

			if tc.refuse {
				e.targets[1].refuse = "bad"
			}
			errs := e.set.Apply(ctx, []*v1alpha2.Subscription{good, tc.bad})
			require.Len(t, errs, 1)
			assert.ErrorContains(t, errs[0], tc.wantErr)
			assert.True(t, e.served(t, "shop", "good"), "the others are served regardless")
			assert.True(t, e.hasConsumer(t, "shop", "bad"), "the consumer stays")
			assert.False(t, e.targets[1].has("shop", "bad"), "a target that cannot serve it does not")
			_, err = e.js.Publish(ctx, "kyma.shop.order.created.v1", []byte("{}"))
			require.NoError(t, err)
			// The server counts a consumer's pending events as its stream
			// signals it, not at the publish's acknowledgement: awaited.
			require.Eventually(t, func() bool { return e.pending(t, "shop", "bad") == 2 }, wait, tick,
				"the event of before and the one published meanwhile wait")
			assert.Len(t, e.set.Subscriptions(), 2)

			e.targets[1].refuse = ""
			require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{good, valid}))
			assert.True(t, e.served(t, "shop", "bad"))
			assert.Equal(t, uint64(2), e.pending(t, "shop", "bad"), "still there for the dispatcher to deliver")

			require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{good}))
			assert.False(t, e.hasConsumer(t, "shop", "bad"), "left out of the set, as deleted: its consumer goes")
		})
	}
}

// TestSetReappliesAfterNATSLostEverything wipes NATS under a Set: Reapply
// makes the stream and the consumer anew, and says that the consumer (and
// the events that waited in it) were lost.
func TestSetReappliesAfterNATSLostEverything(t *testing.T) {
	e := newSetEnv(t)
	ctx := context.Background()
	require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{sub("shop", "orders", "http://orders.shop.svc.cluster.local")}))
	e.nats.Wipe()
	require.Eventually(t, func() bool { return e.js.Conn().IsConnected() }, wait, tick)
	require.False(t, e.hasConsumer(t, "shop", "orders"))

	errs := e.set.Reapply(ctx)
	require.Len(t, errs, 1, "the loss is told")
	assert.ErrorIs(t, errs[0], subscription.ErrConsumerLost)
	assert.ErrorContains(t, errs[0], "Subscription shop/orders")
	assert.True(t, e.served(t, "shop", "orders"), "the stream is recreated, then the consumer")
	assert.Empty(t, e.set.Reapply(ctx), "told once")
}

func (e *setEnv) pending(t *testing.T, ns, name string) uint64 {
	t.Helper()
	c, err := e.js.Consumer(context.Background(), e.streams.EventStream, stream.ConsumerName(ns, name))
	require.NoError(t, err)
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	return info.NumPending
}

// TestSetHoldsANamespaceToItsLimits: kfn dev and -subscriptions hold a
// namespace's Subscriptions to the limits as a cluster does, in the order
// the manifests give them: the third of a namespace allowed two has no
// consumer and its error says why; another namespace's is not affected;
// a consumer it had before is deleted; and Reapply makes none for it.
func TestSetHoldsANamespaceToItsLimits(t *testing.T) {
	e := newSetEnv(t)
	ctx := context.Background()
	e.set = subscription.NewSet(subscription.Applier{JetStream: e.js, Streams: e.streams,
		Limits: subscription.Limits{MaxConsumersPerNamespace: 2}}, e.targets[0], e.targets[1])
	a, b, c := sub("shop", "a", "http://a.shop.svc.cluster.local"), sub("shop", "b", "http://b.shop.svc.cluster.local"), sub("shop", "c", "http://c.shop.svc.cluster.local")
	other := sub("bank", "x", "http://x.bank.svc.cluster.local")
	require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{c, other}), "c first: within the limits")
	require.True(t, e.hasConsumer(t, "shop", "c"))

	errs := e.set.Apply(ctx, []*v1alpha2.Subscription{a, b, c, other})
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], subscription.ErrNamespaceLimit)
	assert.Contains(t, errs[0].Error(), "Subscription shop/c: namespace's limit of Subscriptions reached: 2 Subscriptions of namespace shop were made before this one")
	assert.True(t, e.hasConsumer(t, "shop", "a"))
	assert.True(t, e.hasConsumer(t, "shop", "b"))
	assert.False(t, e.hasConsumer(t, "shop", "c"), "its consumer is deleted")
	assert.True(t, e.hasConsumer(t, "bank", "x"), "another namespace's is not affected")

	require.NoError(t, e.js.DeleteStream(ctx, e.streams.EventStream))
	require.NoError(t, jsstream.Ensure(ctx, e.js, e.streams))
	for _, err := range e.set.Reapply(ctx) {
		require.ErrorIs(t, err, subscription.ErrConsumerLost)
	}
	assert.True(t, e.hasConsumer(t, "shop", "a"))
	assert.False(t, e.hasConsumer(t, "shop", "c"), "Reapply makes none for it")
}

// TestDeleteTakesTheConsumerOutOfEveryPartition: a Subscription taken out
// of the set leaves no consumer in any partition (one left would keep its
// events in that stream for ever, interest retention).
func TestDeleteTakesTheConsumerOutOfEveryPartition(t *testing.T) {
	ctx := context.Background()
	js := natstest.Start(t).JetStream()
	streams := stream.DefaultConfig()
	streams.Storage, streams.Partitions = stream.StorageMemory, 3
	require.NoError(t, jsstream.Ensure(ctx, js, streams))
	a := subscription.Applier{JetStream: js, Streams: streams}
	consumers := func() (n int) {
		for _, name := range streams.PartitionStreams() {
			_, err := js.Consumer(ctx, name, stream.ConsumerName("shop", "orders"))
			if err == nil {
				n++
				continue
			}
			require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
		}
		return n
	}
	obs := a.Apply(ctx, sub("shop", "orders", "http://orders.shop.svc.cluster.local"))
	require.NoError(t, obs.ConsumerError)
	assert.Equal(t, 3, consumers())
	require.NoError(t, a.Delete(ctx, "shop", "orders"))
	assert.Zero(t, consumers())
	require.NoError(t, a.Delete(ctx, "shop", "orders"), "deleting what is gone is no error")

	// The count lowered to one: partitions 1 and 2, taken away, are still
	// drained, and a consumer left there would keep its events.
	obs = a.Apply(ctx, sub("shop", "orders", "http://orders.shop.svc.cluster.local"))
	require.NoError(t, obs.ConsumerError)
	one := streams
	one.Partitions = 1
	require.NoError(t, subscription.Applier{JetStream: js, Streams: one}.Delete(ctx, "shop", "orders"))
	assert.Zero(t, consumers(), "deleted in the partitions taken away too")
}

// TestSetKeepsTheStreamsLastConsumersForEveryNamespacesFirst: kfn dev and
// -subscriptions keep the event stream's reserve as a cluster does. The
// stream takes 8 consumers, a namespace may have 4: two namespaces at
// their limit get 6, the rest of the second waits with the reason, and a
// third namespace's first Subscription still gets its consumer (without
// the reserve NATS refused it). A Subscription with its consumer keeps it
// when the set is applied again; when the set leaves two out, the
// consumers they free go to the next that waited, in the same Apply.
func TestSetKeepsTheStreamsLastConsumersForEveryNamespacesFirst(t *testing.T) {
	e := newSetEnv(t)
	ctx := context.Background()
	e.streams.MaxConsumers = 8
	require.NoError(t, jsstream.Ensure(ctx, e.js, e.streams))
	e.set = subscription.NewSet(subscription.Applier{JetStream: e.js, Streams: e.streams,
		Limits: subscription.Limits{MaxConsumersPerNamespace: 4}}, e.targets[0], e.targets[1])
	var subs []*v1alpha2.Subscription
	for _, ns := range []string{"a", "b"} {
		for i := range 4 {
			name := fmt.Sprintf("%s%d", ns, i)
			subs = append(subs, sub(ns, name, fmt.Sprintf("http://%s.%s.svc.cluster.local", name, ns)))
		}
	}
	victim := sub("victim", "orders", "http://orders.victim.svc.cluster.local")
	subs = append(subs, victim)

	errs := e.set.Apply(ctx, subs)
	require.Len(t, errs, 2, "%v", errs)
	for i, name := range []string{"b2", "b3"} {
		require.ErrorIs(t, errs[i], subscription.ErrNamespaceLimit)
		assert.Contains(t, errs[i].Error(), "Subscription b/"+name+": namespace's limit of Subscriptions reached: ")
		assert.Contains(t, errs[i].Error(), "the event stream holds 6 consumers of its 8: the last 2 are kept for namespaces holding fewer than 1")
		assert.False(t, e.hasConsumer(t, "b", name), name)
	}
	assert.True(t, e.hasConsumer(t, "victim", "orders"), "the third namespace's first Subscription gets its consumer")
	assert.True(t, e.hasConsumer(t, "b", "b1"))

	errs = e.set.Apply(ctx, subs)
	require.Len(t, errs, 2, "%v", errs)
	assert.True(t, e.hasConsumer(t, "b", "b1"), "it keeps its consumer")

	errs = e.set.Apply(ctx, subs[2:])
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs[0].Error(), "Subscription b/b3: ")
	assert.True(t, e.hasConsumer(t, "b", "b2"), "a0 and a1 left room for b2")
	assert.False(t, e.hasConsumer(t, "a", "a0"))
}
