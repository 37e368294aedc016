package subscription_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/internal/natstest"
	"github.com/kfn-dev/kfn/eventbridge/stream"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
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
	require.NoError(t, stream.Ensure(context.Background(), e.js, e.streams))
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

func TestSetLeavesOutWhatItCannotServe(t *testing.T) {
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
			// Served first, so that leaving it out must also undo it.
			require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{good, sub("shop", "bad", "http://fn.shop.svc.cluster.local")}))
			require.True(t, e.served(t, "shop", "bad"))

			if tc.refuse {
				e.targets[1].refuse = "bad"
			}
			errs := e.set.Apply(ctx, []*v1alpha2.Subscription{good, tc.bad})
			require.Len(t, errs, 1)
			assert.ErrorContains(t, errs[0], tc.wantErr)
			assert.True(t, e.served(t, "shop", "good"), "the others are served regardless")
			assert.False(t, e.served(t, "shop", "bad"))
			assert.Len(t, e.set.Subscriptions(), 1)
		})
	}
}

func TestSetReappliesAfterNATSLostEverything(t *testing.T) {
	e := newSetEnv(t)
	ctx := context.Background()
	require.Empty(t, e.set.Apply(ctx, []*v1alpha2.Subscription{sub("shop", "orders", "http://orders.shop.svc.cluster.local")}))
	e.nats.Wipe()
	require.Eventually(t, func() bool { return e.js.Conn().IsConnected() }, wait, tick)
	require.False(t, e.hasConsumer(t, "shop", "orders"))

	require.Empty(t, e.set.Reapply(ctx), "the stream is recreated, then the consumer")
	assert.True(t, e.served(t, "shop", "orders"))
}
