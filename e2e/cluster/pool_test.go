package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/test/node/install"
	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// The warm pool's labels and annotation (controller/pool's LabelShape,
// LabelClaimedBy, AnnotationSize; this module does not build the
// controller's packages).
const (
	poolShapeLabel     = "kfn.dev/pool-shape"
	poolClaimedByLabel = "kfn.dev/pool-claimed-by"
	poolSizeAnnotation = "kfn.dev/warm-pool-size"
)

// standbyPods lists the warm pool's standby pods of a namespace that are
// started (their host serves) and not being deleted.
func standbyPods(t *testing.T, ns string) ([]corev1.Pod, error) {
	pods, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: poolShapeLabel})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		if s := p.Status.ContainerStatuses[0].Started; s != nil && *s {
			out = append(out, p)
		}
	}
	return out, nil
}

// setPoolSize sets how many standby pods the warm pool keeps in ns (the
// shared install keeps none by default).
func setPoolSize(t *testing.T, ns string, n int) {
	t.Helper()
	nsObj, err := platform.cluster.Clientset.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Annotations = map[string]string{poolSizeAnnotation: strconv.Itoa(n)}
	_, err = platform.cluster.Clientset.CoreV1().Namespaces().Update(t.Context(), nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// waitStandby waits until the namespace has a started standby pod and
// returns its name.
func waitStandby(t *testing.T, ns string) string {
	t.Helper()
	var name string
	eventually(t, 2*time.Minute, "a started standby pod in "+ns, func() error {
		pods, err := standbyPods(t, ns)
		if err != nil {
			return err
		}
		if len(pods) != 1 {
			return fmt.Errorf("%d started standby pods", len(pods))
		}
		name = pods[0].Name
		return nil
	})
	return name
}

// TestWarmPoolWakesAFunctionOnAStandbyPod runs the warm pool on the real
// node in a namespace that asks for one standby pod (the shared install
// keeps none by default, so that the other scenarios' pods are theirs): a
// Function at zero is woken by one event, which the standby pod, given
// the Function at once, handles, once; the pod wears the Function's labels
// and owner, is deleted once the Function's own pod is ready, and the pool
// is refilled; after the Function is back at zero, an HTTP request through
// the gateway is served by the new standby pod. The figures go with the
// Deployment path's (make bench reads them).
func TestWarmPoolWakesAFunctionOnAStandbyPod(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "warm")
	setPoolSize(t, ns, 1)
	apply(t, ns, scalingFunction("warm", 0, 2, 15, 10, 0))
	apply(t, ns, subscription(ns, "warm", "warm", "order.paid.v1", nil))
	waitSubscriptionReady(t, ns, "warm")
	first := waitStandby(t, ns)
	waitAtZero(t, ns, "warm", 3*time.Minute)

	metrics := metricsReader(t, ns)
	// The event bridge pods that are Ready: another scenario may roll
	// the event bridge meanwhile (a pod replaced starts its counters
	// from zero, which counted reads as per pod).
	perPod := func(t *testing.T, prefix string) map[string]float64 { return metrics.sumReady(t, prefix) }
	total := func(t *testing.T, prefix string) float64 {
		sum := 0.0
		for _, n := range perPod(t, prefix) {
			sum += n
		}
		return sum
	}
	const granted = `kfn_eventbridge_claims_total{result="claimed"}`
	claimsGranted := func(t *testing.T) map[string]float64 { return perPod(t, granted) }
	// rose reports whether a pod's count of granted claims rose since
	// before (a pod that was not there counts from zero).
	rose := func(t *testing.T, before map[string]float64) bool {
		for pod, n := range claimsGranted(t) {
			if n > before[pod] {
				return true
			}
		}
		return false
	}
	// claimTime logs how long the claims since the last call took, as
	// the event bridge saw them (from the first event or request to the
	// controller's answer), and the wake's timeline: where its time goes.
	lastClaimSeconds := total(t, "kfn_eventbridge_claim_seconds_sum")
	claimTime := func(t *testing.T, what, standby string, start time.Time) {
		now := total(t, "kfn_eventbridge_claim_seconds_sum")
		t.Logf("%s: the claims took %.1f ms", what, (now-lastClaimSeconds)*1000)
		coldStarts.add("pool claim "+what, 0, time.Duration((now-lastClaimSeconds)*float64(time.Second)))
		lastClaimSeconds = now
		coldStarts.note("warm pool wake, " + what + ", as the platform logged it:\n" + strings.Join(wakeTimeline(t, ns, standby, start), "\n"))
	}

	t.Run("one event is handled by the standby pod, once", func(t *testing.T) {
		id := ns + "-wake"
		claimsBefore := claimsGranted(t)
		heldBefore := claimHoldsEnded(t)
		start := time.Now()
		publish(t, "order.paid.v1", "shop", id, `{"wake": true}`)
		require.NoError(t, platform.recorder.waitAll(t.Context(), "warm", []string{id}, time.Minute))
		delivered := time.Since(start)
		t.Logf("warm pool wake by event: published -> delivered %s", delivered.Round(time.Millisecond))
		coldStarts.add("pool event", 0, delivered)
		assert.Equal(t, map[string]int{first: 1}, platform.recorder.podCounts("warm"), "the standby pod handled the waking event")
		assert.True(t, rose(t, claimsBefore), "the event bridge claimed the pod for the event (the scaler's activation)")
		eventually(t, 30*time.Second, "a scaler told KEDA once the bridge said the claim ended", func() error {
			if now := claimHoldsEnded(t); now <= heldBefore {
				return fmt.Errorf("kfn_scaler_activation_holds_total{ended_by=\"claim_ended\"}: %v, %v before", now, heldBefore)
			}
			return nil
		})
		claimTime(t, "event", first, start)

		// Labelled behind the claim's answer (the first deliveries first).
		var claimed *corev1.Pod
		eventually(t, 30*time.Second, "the claimed pod labelled as the Function's", func() error {
			var err error
			if claimed, err = platform.cluster.Clientset.CoreV1().Pods(ns).Get(t.Context(), first, metav1.GetOptions{}); err != nil {
				return err
			}
			if claimed.Labels[poolClaimedByLabel] == "" {
				return fmt.Errorf("%s not labelled yet: %v", first, claimed.Labels)
			}
			return nil
		})
		assert.Equal(t, "warm", claimed.Labels[functionLabel], "in the Function's Service")
		assert.Equal(t, "warm", claimed.Labels[poolClaimedByLabel])
		assert.NotContains(t, claimed.Labels, poolShapeLabel)
		require.Len(t, claimed.OwnerReferences, 1)
		assert.Equal(t, "Function", claimed.OwnerReferences[0].Kind)
		assert.Equal(t, "warm", claimed.OwnerReferences[0].Name)

		publish(t, "order.paid.v1", "shop", id+"-after", `{"wake": false}`)
		require.NoError(t, platform.recorder.waitAll(t.Context(), "warm", []string{id + "-after"}, time.Minute))
		assert.Equal(t, 1, platform.recorder.counts("warm")[id], "the event that woke the Function was delivered once")
	})

	t.Run("the standby pod goes once the Function's own pod is ready, and the pool is refilled", func(t *testing.T) {
		eventually(t, 2*time.Minute, "the claimed pod deleted", func() error {
			_, err := platform.cluster.Clientset.CoreV1().Pods(ns).Get(t.Context(), first, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("%s still there", first)
			}
			return nil
		})
		_, ready, err := replicas(ns, "warm")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ready, int32(1), "the Deployment's own pod is ready")
		second := waitStandby(t, ns)
		assert.NotEqual(t, first, second, "a new standby pod")
	})

	t.Run("an HTTP request at zero is served by a standby pod", func(t *testing.T) {
		waitAtZero(t, ns, "warm", 3*time.Minute)
		standby := waitStandby(t, ns)
		url := fmt.Sprintf("%s/%s/warm/?id=%s-http", platform.gateway, ns, ns)
		token := invoker(t, ns)
		claimsBefore := claimsGranted(t)
		start := time.Now()
		code, body, err := getAs(url, token)
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Equal(t, 200, code, body)
		assert.Equal(t, "handled "+ns+"-http", body)
		t.Logf("warm pool wake by HTTP through the gateway: %s", elapsed.Round(time.Millisecond))
		coldStarts.add("pool http", 0, elapsed)
		assert.Equal(t, 1, platform.recorder.podCounts("warm")[standby], "the standby pod served the request")
		assert.True(t, rose(t, claimsBefore), "the request claimed the pod itself")
		claimTime(t, "http", standby, start)
	})
}

// claimHoldsEnded sums, over the scaler pods, the activations held from
// KEDA that a bridge's word on the claim ended (the scalers' plain HTTP
// metrics, which carry no tenant's names); a pod whose metrics cannot be
// read counts nothing (another scenario may be replacing it).
func claimHoldsEnded(t *testing.T) float64 {
	t.Helper()
	const series = `kfn_scaler_activation_holds_total{ended_by="claim_ended"} `
	sum := 0.0
	for _, p := range podsOf(t, scalerSelector) {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		_, body, err := getAs("http://"+p.Status.PodIP+":8080/metrics", "")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, series); ok {
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				require.NoError(t, err, "%s: %q", p.Name, line)
				sum += n
			}
		}
	}
	return sum
}

// wakeTimeline returns, in time order, what the platform logged of a wake
// of a Function of namespace ns that began at start: the scalers'
// activation, the event bridges' claims, the controller's answer (lines
// that name ns), and what the standby pod's host logged, each with its
// time since start (the container runtime's timestamps, on this
// machine's clock).
func wakeTimeline(t *testing.T, ns, standby string, start time.Time) []string {
	t.Helper()
	names := func(text string) bool { return strings.Contains(text, `"`+ns+`"`) || strings.Contains(text, ns+"/") }
	return platform.cluster.LogsSince(t.Context(), start,
		singlenode.LogSource{Namespace: install.Namespace, Selector: scalerSelector, Keep: names},
		singlenode.LogSource{Namespace: install.Namespace, Selector: eventBridgeSelector, Keep: names},
		singlenode.LogSource{Namespace: install.Namespace, Selector: controllerSelector, Keep: names},
		singlenode.LogSource{Namespace: ns, Name: standby})
}
