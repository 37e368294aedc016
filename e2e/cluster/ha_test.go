package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/test/clusterinstall"
)

// TestKilledStreamLeaderLosesNoEvent kills (SIGKILL, no grace) the NATS
// server that leads the event stream while events are published at a
// steady pace: the two other servers elect a new leader, every event the
// publisher acknowledged reaches the function, and the test reports the
// longest time without an acknowledged publish, the publish p99 and the
// duplicates. It needs the HA profile (3 NATS servers, R3 streams) and is
// skipped on the small one. A publish that fails is retried with the same
// id, as a producer does; JetStream's de-duplication stores it once.
func TestKilledStreamLeaderLosesNoEvent(t *testing.T) {
	sts, err := platform.cluster.Clientset.AppsV1().StatefulSets(clusterinstall.Namespace).Get(t.Context(), "kfn-nats", metav1.GetOptions{})
	require.NoError(t, err)
	if *sts.Spec.Replicas < 3 {
		t.Skipf("needs the chart's profile ha (3 NATS servers); the install runs %d (%s)", *sts.Spec.Replicas, clusterinstall.ProfileEnv)
	}
	start := time.Now()
	ns := namespace(t, "leader")
	apply(t, ns, recordingFunction("sink", "leader-sink", 200, ""))
	apply(t, ns, subscription(ns, "sink", "sink", "order.created.v1", nil))
	waitRunning(t, ns, "sink", 3*time.Minute)
	waitSubscriptionReady(t, ns, "sink")

	load := startLoad(t, ns)
	load.waitAcked(t, 100)
	leader := streamLeader(t, "kfn-events")
	killPod(t, leader)
	eventually(t, 3*time.Minute, "another server leads the event stream", func() error {
		if l := streamLeader(t, "kfn-events"); l == leader || l == "" {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	load.waitAcked(t, load.count()+100)
	acked, fails, outage, p99 := load.stop()

	require.NoError(t, platform.recorder.waitAll(t.Context(), "leader-sink", acked, 5*time.Minute))
	dups := 0
	for _, n := range platform.recorder.counts("leader-sink") {
		dups += n - 1
	}
	t.Logf("killed stream leader %s (new leader %s): %d events acknowledged, all delivered; %d failed publish attempts; longest publish outage %s; publish p99 %s; %d duplicate deliveries; scenario took %s",
		leader, streamLeader(t, "kfn-events"), len(acked), fails, outage.Round(time.Millisecond), p99.Round(time.Millisecond), dups, time.Since(start).Round(time.Second))
}

// load publishes events at a steady pace (one every 20 ms, each retried
// with its id until acknowledged) and keeps what a fault costs.
type load struct {
	cancel func()
	wg     sync.WaitGroup

	mu        sync.Mutex
	acked     []string
	fails     int
	latencies []time.Duration
	lastAck   time.Time
	outage    time.Duration
}

func startLoad(t *testing.T, ns string) *load {
	ctx, cancel := context.WithCancel(t.Context())
	l := &load{cancel: cancel, lastAck: time.Now()}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("%s-%05d", ns, i)
			for ctx.Err() == nil {
				began := time.Now()
				code, _, err := publishEvent("order.created.v1", "shop", id, `{}`)
				now := time.Now()
				l.mu.Lock()
				if err == nil && code/100 == 2 {
					l.acked = append(l.acked, id)
					l.latencies = append(l.latencies, now.Sub(began))
					l.outage = max(l.outage, now.Sub(l.lastAck))
					l.lastAck = now
					l.mu.Unlock()
					break
				}
				l.fails++
				l.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *load) waitAcked(t *testing.T, n int) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("%d events acknowledged", n), func() error {
		if got := l.count(); got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// stop ends the load and returns the acknowledged ids, the failed
// attempts, the longest time between two acknowledgements (the gap an
// outage makes; 20 ms in steady state) and the p99 of the acknowledged
// publish requests.
func (l *load) stop() ([]string, int, time.Duration, time.Duration) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	lat := slices.Clone(l.latencies)
	slices.Sort(lat)
	var p99 time.Duration
	if len(lat) > 0 {
		p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return slices.Clone(l.acked), l.fails, l.outage, p99
}

// streamLeader asks the NATS servers' monitoring port which server leads
// the stream (server names are pod names); "" while none does.
func streamLeader(t *testing.T, stream string) string {
	t.Helper()
	pods, err := platform.cluster.Clientset.CoreV1().Pods(clusterinstall.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=nats"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		resp, err := httpClient.Get("http://" + p.Status.PodIP + ":8222/jsz?streams=true")
		if err != nil {
			continue
		}
		var jsz struct {
			AccountDetails []struct {
				StreamDetail []struct {
					Name    string `json:"name"`
					Cluster struct {
						Leader string `json:"leader"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		err = json.NewDecoder(resp.Body).Decode(&jsz)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		for _, a := range jsz.AccountDetails {
			for _, s := range a.StreamDetail {
				if s.Name == stream && s.Cluster.Leader != "" {
					return s.Cluster.Leader
				}
			}
		}
	}
	return ""
}

// killPod deletes one of kfn's pods at once (grace period 0: SIGKILL) and
// waits until its replacement (a StatefulSet's keeps the name) is ready.
func killPod(t *testing.T, name string) {
	t.Helper()
	pods := platform.cluster.Clientset.CoreV1().Pods(clusterinstall.Namespace)
	old, err := pods.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, pods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	t.Logf("killed %s", name)
	eventually(t, 3*time.Minute, name+" replaced and ready", func() error {
		p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("still the killed pod")
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return nil
			}
		}
		return fmt.Errorf("not ready")
	})
}
