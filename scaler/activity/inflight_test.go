package activity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/internal/natsinflight"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/scalertest"
)

// TestInFlightReportsReachEveryReplica runs two scaler cores, each
// subscribed to the gateway's in-flight reports (package
// contract/inflight) as a scaler replica is, and one gateway-side
// Publisher, all on an embedded NATS.
func TestInFlightReportsReachEveryReplica(t *testing.T) {
	n := scalertest.StartNATS(t)
	fn := types.NamespacedName{Namespace: "shop", Name: "orders"}
	const subject = "kfn.test.inflight" // not the default: both ends must honour WithSubject
	raw, err := n.Conn.SubscribeSync(subject)
	require.NoError(t, err)
	var cores []*activity.Scaler
	var watches []<-chan struct{}
	for range 2 {
		core, err := activity.New(activity.NewJetStreamReader(n.JS, n.Streams), nil, activity.WithActivationHold(0))
		require.NoError(t, err)
		require.NoError(t, core.Refresh(context.Background()))
		stop, err := natsinflight.Subscribe(scalertest.Connect(t, n.Server.ClientURL()), core, natsinflight.WithSubject(subject))
		require.NoError(t, err)
		t.Cleanup(stop)
		active, ch, cancel := core.Watch(fn)
		t.Cleanup(cancel)
		require.False(t, active)
		cores, watches = append(cores, core), append(watches, ch)
	}
	pub, err := natsinflight.NewPublisher(scalertest.Connect(t, n.Server.ClientURL()), natsinflight.WithSubject(subject))
	require.NoError(t, err)

	// Garbage first: dropped, changes nothing; then a real report.
	require.NoError(t, n.Conn.Publish(subject, []byte(`{"source":"evil","ttlMillis":1000,"functions":[{"namespace":"shop","name":"orders","inFlight":-5}]}`)))
	pub.ReportInFlight("gw-0", map[types.NamespacedName]int{fn: 2}, time.Minute)
	for range 2 { // the garbage, then the publisher's report
		_, err := raw.NextMsg(5 * time.Second)
		require.NoError(t, err, "the reports travel on the subject asked for")
	}
	for i, ch := range watches {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("replica %d: no activation from the report", i)
		}
		st, err := cores[i].State(fn)
		require.NoError(t, err)
		assert.Equal(t, 2, st.InFlight, "replica %d", i)
		assert.True(t, st.Active)
	}

	// The next report replaces it.
	pub.ReportInFlight("gw-0", nil, time.Minute)
	for i, core := range cores {
		require.Eventually(t, func() bool {
			st, err := core.State(fn)
			return err == nil && st.InFlight == 0
		}, 5*time.Second, 5*time.Millisecond, "replica %d", i)
	}
}
