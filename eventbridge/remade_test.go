package eventbridge_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/test/natstest"
	"github.com/kfn-dev/kfn/test/testcluster"
	"github.com/kfn-dev/kfn/test/testport"
)

// TestNoAcknowledgedEventIsLostWhenTheStreamIsMadeAnew: NATS loses its
// storage while the event bridge is down (a single server without its
// volume; a move from one server to a cluster does the same to the
// stream), and the event bridge starts again while another replica holds
// the reconciler's lease, as a new pod of a rolling update does: the
// event stream it makes anew has no consumer, and an event the stream
// takes then is acknowledged and kept for nobody (interest retention).
// So every publish is refused (503) until the leader made every
// Subscription's consumer in the new stream; then publishing goes on, and
// every event acknowledged is delivered, once.
//
// The lease is held by hand, not by a second event bridge: that makes the
// wait for the leader as long as the test needs, where a real one would
// end it after its lease's 15 s.
func TestNoAcknowledgedEventIsLostWhenTheStreamIsMadeAnew(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	var mu sync.Mutex
	delivered := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered[r.Header.Get("Ce-Id")]++
		mu.Unlock()
	}))
	defer sink.Close()
	cluster := testcluster.New(t, testcluster.WithScheme(v1alpha2.AddToScheme))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cluster.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
	ns := natstest.Start(t)

	cfg := eventbridge.DefaultProcess()
	cfg.NATSURL = ns.URL()
	cfg.Listen, cfg.AdminListen, cfg.MetricsListen = testport.Addr(t), "", ""
	cfg.LeaderElection, cfg.LeaderElectionNamespace = true, metav1.NamespaceDefault
	cfg.Resolve = map[string]string{"orders.default": sink.URL}
	cfg.Dispatcher.Egress.AllowLoopback = true
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- eventbridge.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				select {
				case err := <-done:
					assert.NoError(t, err, "a clean shutdown")
				case <-time.After(20 * time.Second):
					t.Error("the event bridge did not stop within 20s")
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	publish := func(id string) int { return publishStatus(t, cfg.Listen, id) }
	bg := context.Background()
	c := cluster.Client
	require.NoError(t, c.Create(bg, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}))
	require.NoError(t, c.Create(bg, &discoveryv1.EndpointSlice{ // the sink is up
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "orders-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "orders"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}))
	require.NoError(t, c.Create(bg, &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec:       v1alpha2.SubscriptionSpec{Sink: "http://orders.default.svc.cluster.local", Source: "shop", Types: []string{"order.created.v1"}},
	}))

	// The event bridge as it ran before: the Subscription served.
	stop := run()
	require.Eventually(t, func() bool {
		var s v1alpha2.Subscription
		return c.Get(bg, client.ObjectKey{Namespace: "default", Name: "orders"}, &s) == nil && s.Status.Ready
	}, 30*time.Second, 20*time.Millisecond, "the Subscription becomes ready")
	require.Eventually(t, func() bool { return publish("before") == http.StatusNoContent }, 20*time.Second, 20*time.Millisecond, "the bridge publishes")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return delivered["before"] > 0 }, 20*time.Second, 20*time.Millisecond, "and delivers")
	stop()

	// NATS without its storage; another replica holds the lease.
	ns.Shutdown()
	require.NoError(t, os.RemoveAll(ns.StoreDir()))
	ns.Restart()
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kfn-eventbridge-reconciler"}
	require.NoError(t, c.Get(bg, key, lease), "the first run led")
	lease.Spec.HolderIdentity = ptr.To("another-replica")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	require.NoError(t, c.Update(bg, lease))

	run()
	var acked []string
	n := 0
	next := func() (string, int) {
		n++
		id := strconv.Itoa(n)
		code := publish(id)
		if code == http.StatusNoContent {
			acked = append(acked, id)
		}
		return id, code
	}
	require.Eventually(t, func() bool { _, code := next(); return code != 0 }, 20*time.Second, 20*time.Millisecond, "the bridge serves")
	for range 20 {
		next()
	}
	ackedWithoutLeader := len(acked)

	// The other replica is gone: this one leads, makes the consumer and
	// opens the stream.
	require.NoError(t, c.Delete(bg, lease))
	require.Eventually(t, func() bool { next(); return len(acked) >= ackedWithoutLeader+20 }, 60*time.Second, 20*time.Millisecond,
		"publishing goes on once the leader made the consumers")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range acked {
			if delivered[id] == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every acknowledged event is delivered: %v of %v", acked, delivered)
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for _, id := range acked {
		if delivered[id] == 0 {
			missing = append(missing, id)
		}
		assert.LessOrEqual(t, delivered[id], 1, "event %s delivered once", id)
	}
	assert.Empty(t, missing, "acknowledged and never delivered (of %d acknowledged, %d before the leader)", len(acked), ackedWithoutLeader)
	assert.Zero(t, ackedWithoutLeader, "nothing acknowledged before the consumers exist")
	t.Logf("%d publishes, %d acknowledged, %d before the leader made the consumers", n, len(acked), ackedWithoutLeader)
}
