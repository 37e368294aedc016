package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/test/clusterinstall"
)

// TestKilledDispatcherAndNATSLoseNoEvent publishes a steady stream of
// events while the event bridge's pod (publisher and dispatcher) and then
// the NATS server's pod are killed (SIGKILL, no grace): every event the
// publisher acknowledged reaches the function. A publish that fails (the
// publisher is down) is retried with the same id, as a producer does;
// JetStream's de-duplication stores it once.
func TestKilledDispatcherAndNATSLoseNoEvent(t *testing.T) {
	ns := namespace(t, "faults")
	apply(t, ns, recordingFunction("sink", "faults-sink", 200, ""))
	apply(t, ns, subscription(ns, "sink", "sink", "order.created.v1", nil))
	waitRunning(t, ns, "sink", 3*time.Minute)
	waitSubscriptionReady(t, ns, "sink")

	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked []string
		fails int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("%s-%05d", ns, i)
			// Retry until stored or the stream is stopped.
			for ctx.Err() == nil {
				code, _, err := publishEvent("order.created.v1", "shop", id, `{}`)
				if err == nil && code/100 == 2 {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
					break
				}
				mu.Lock()
				fails++
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcked := func(n int) {
		eventually(t, 3*time.Minute, fmt.Sprintf("%d events acknowledged", n), func() error {
			if got := ackedCount(); got < n {
				return fmt.Errorf("%d acknowledged", got)
			}
			return nil
		})
	}

	waitAcked(50)
	kill(t, "app.kubernetes.io/component=eventbridge")
	waitAcked(ackedCount() + 50)
	kill(t, "app.kubernetes.io/component=nats")
	waitAcked(ackedCount() + 50)
	cancel()
	wg.Wait()

	mu.Lock()
	all := append([]string(nil), acked...)
	mu.Unlock()
	t.Logf("%d events acknowledged, %d publish attempts failed while a pod was down", len(all), fails)
	require.NoError(t, platform.recorder.waitAll(t.Context(), "faults-sink", all, 5*time.Minute))
}

// kill deletes kfn's pods with the label selector at once (grace period
// 0: the kubelet sends SIGKILL), and waits until a replacement is ready.
func kill(t *testing.T, selector string) {
	t.Helper()
	pods := platform.cluster.Clientset.CoreV1().Pods(clusterinstall.Namespace)
	list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	require.NotEmpty(t, list.Items, "pods %s", selector)
	old := map[string]bool{}
	for _, p := range list.Items {
		old[string(p.UID)] = true
		require.NoError(t, pods.Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		t.Logf("killed %s", p.Name)
	}
	eventually(t, 3*time.Minute, "a new ready pod for "+selector, func() error {
		list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if old[string(p.UID)] || p.DeletionTimestamp != nil {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					return nil
				}
			}
		}
		return fmt.Errorf("no new ready pod among %d", len(list.Items))
	})
}
