package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/pull"
	"github.com/kfn-dev/kfn/test/natstest"
)

// A worker replaced by Upsert (its Subscription changed) has its pull take
// the consumer's events before Upsert returns and the old worker stops: an
// event arriving in between finds a pull to take it, not none (which would
// leave it for the ack wait).
func TestReplacedWorkerPullsBeforeTheOldStops(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect())
	require.NoError(t, err)
	streams := stream.DefaultConfig()
	d := testScheduler(t, js, streams)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.puller != nil }, 5*time.Second, time.Millisecond)

	s := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec:       v1alpha2.SubscriptionSpec{Sink: "http://fn.default.svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
	}
	pullOf := func() (*pull.Pull, *pull.Pull) {
		d.mu.Lock()
		defer d.mu.Unlock()
		w := d.workers[key{"default", "s", 0}]
		return w.pl, d.puller.PullOf(stream.ConsumerName("default", "s"))
	}
	for _, inFlight := range []string{"1", "5"} {
		s.Spec.Config = map[string]v1alpha2.ConfigValue{v1alpha2.ConfigMaxInFlightMessages: v1alpha2.ConfigValue(inFlight)}
		require.NoError(t, d.Upsert(s))
		own, routed := pullOf()
		require.NotNil(t, own, "maxInFlightMessages %s", inFlight)
		require.Same(t, own, routed, "maxInFlightMessages %s: the consumer's events go to the current worker once Upsert returns", inFlight)
	}
}
