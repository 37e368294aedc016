package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/test/node/install"
)

// nodeLossEnv skips the node-loss scenario when set to 1 (it adds a
// second node to the shared install for a few minutes).
const nodeLossEnv = "KFN_SKIP_NODE_LOSS"

// secondNodeImages are the image archives a second node gets: what the
// pods moved there run (the sandbox, NATS, kfn's server image and the
// sink Function's runtime). The other archives (KEDA, CoreDNS, the other
// runtimes) would double the import for pods that stay on the first node.
var secondNodeImages = []string{"cluster-pause.tar", "cluster-nats.tar", "kfn.tar", "runtime-nodejs22.tar"}

// outOfServiceTaint is Kubernetes' mark of a node that is known to be
// gone (non-graceful node shutdown): its pods are deleted at once,
// StatefulSet pods included, and their volumes detached. Without it a
// StatefulSet pod of a lost node stays Terminating until the node comes
// back or is deleted, and a Deployment's pods are replaced only after
// their tolerationSeconds for node.kubernetes.io/unreachable (300 s by
// default).
var outOfServiceTaint = corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// TestNodeLossLosesNoEvent adds a second node to the cluster, lets the
// chart's soft anti-affinity put one replica of each of kfn's components
// there (one of the three NATS servers, an event bridge, a controller, a
// scaler) and starts the sink Function on it, then, under the steady
// publish load, which it makes publish through the event bridge on that
// node, kills every process of that node with SIGKILL (kubelet,
// kube-proxy, containerd, the shims and every process of its pods). It
// requires that publishing goes on while the node is lost (through the
// first node's event bridge; the two NATS servers left keep a quorum), that
// the node is found NotReady, that once it is marked out of service (what
// an operator or a node-health automation does for a node known to be
// gone) every one of kfn's pods and the sink run again on the first node,
// and that every acknowledged event reaches the sink, with at most three
// times natsFaultHeld duplicates (the dispatcher, the NATS server and the
// sink that died with the node each hold at most that many events
// unacknowledged). It logs how long each step took.
func TestNodeLossLosesNoEvent(t *testing.T) { nodeLoss(t, false) }

// TestSilentNodeLossLosesNoEvent is TestNodeLossLosesNoEvent with a node
// that goes silent before its processes die (Node.Disconnect): as after
// a power or network loss, no connection to it is closed or refused, and
// every peer (the publishing client, the other event bridge, the NATS
// servers and clients, the dispatcher delivering to the sink) learns of
// the loss by its own timeouts only: the load's request to the lost
// event bridge fails after its client's 30 s timeout, and a new
// connection may land on the lost event bridge again until the node is
// NotReady and its endpoints are removed, so publishing is only required
// to go on once the node's pods are replaced.
func TestSilentNodeLossLosesNoEvent(t *testing.T) { nodeLoss(t, true) }

// nodeLoss runs the node-loss scenario; silent disconnects the node
// before killing it.
func nodeLoss(t *testing.T, silent bool) {
	if os.Getenv(nodeLossEnv) == "1" {
		t.Skipf("%s=1", nodeLossEnv)
	}
	requireHA(t)
	start := time.Now()
	ctx := t.Context()
	cs := platform.cluster.Clientset
	first := platform.cluster.Config.NodeName

	var images []string
	for _, a := range platform.archives {
		if slices.Contains(secondNodeImages, filepath.Base(a)) {
			images = append(images, a)
		}
	}
	require.Len(t, images, len(secondNodeImages), "image archives %v among %v", secondNodeImages, platform.archives)
	node, err := platform.cluster.AddNode(ctx, images, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := node.Remove(context.Background()); err != nil {
			t.Errorf("remove node %s: %v", node.Name, err)
		}
	})
	added := time.Since(start)

	// One replica of each component moves: its pod is deleted, and the
	// scheduler places the replacement by the chart's anti-affinity on
	// the node without a sibling.
	selectors := []string{natsSelector, eventBridgeSelector, controllerSelector, scalerSelector}
	for _, sel := range selectors {
		pods := podsOf(t, sel)
		require.NotEmpty(t, pods, sel)
		victim := pods[len(pods)-1]
		old := map[types.UID]bool{}
		for _, p := range pods {
			old[p.UID] = true
		}
		require.NoError(t, cs.CoreV1().Pods(install.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}))
		waitReadyPods(t, sel, 1, old)
	}
	for _, sel := range selectors {
		require.Contains(t, nodesOf(t, sel), node.Name, "the anti-affinity puts a replica of %s on the node without one", sel)
		require.Contains(t, nodesOf(t, sel), first, "%s keeps a replica on the first node", sel)
	}
	moved := time.Since(start)

	admitMachine(t, platform.cluster.Config.NodeIP)

	// The sink starts on the second node: the first is cordoned meanwhile.
	cordon(t, first, true)
	ns, fn := faultSink(t, "nodeloss")
	cordon(t, first, false)
	// Cleanups run last first: the node goes before the namespace's
	// description of a failure asks the lost kubelet for logs.
	t.Cleanup(func() { _ = node.Remove(context.Background()) })
	sinkPods := functionPods(t, ns, "sink")
	require.Len(t, sinkPods, 1)
	require.Equal(t, node.Name, sinkPods[0].Spec.NodeName, "the sink runs on the second node")
	lostSink := sinkPods[0].Name

	load := startLoad(t, ns)
	load.waitAcked(t, 100)
	eventually(t, 2*time.Minute, "the sink on the second node receives events", func() error {
		if n := platform.recorder.podCounts(fn)[lostSink]; n == 0 {
			return fmt.Errorf("no delivery to %s yet", lostSink)
		}
		return nil
	})
	t.Logf("on node %s: %s", node.Name, strings.Join(podsOn(t, node.Name), ", "))
	// The load publishes through the event bridge that is lost with the
	// node: its keep-alive connection is dropped until a new one lands
	// there (the Service picks an event bridge at random per connection).
	lostBridge := podOn(t, eventBridgeSelector, node.Name)
	eventually(t, 2*time.Minute, "the load publishes through "+lostBridge.Name, func() error {
		if serves(t, lostBridge, 8080, platform.cluster.Config.NodeIP) {
			return nil
		}
		httpClient.CloseIdleConnections()
		return fmt.Errorf("not through %s (%d publishes acknowledged, %d attempts failed)", lostBridge.Name, load.count(), len(load.failures()))
	})
	t.Logf("before the loss: %d publishes acknowledged, %d attempts failed, the load publishing through %s on %s",
		load.count(), len(load.failures()), lostBridge.Name, node.Name)

	killedAt := time.Now()
	how := "killed every process of"
	if silent {
		require.NoError(t, node.Disconnect())
		how = "disconnected, then killed every process of"
	}
	require.NoError(t, node.Kill())
	require.False(t, node.Running())
	t.Logf("%s node %s", how, node.Name)

	// The node lifecycle controller marks the node NotReady (Unknown)
	// after its node-monitor-grace-period without a lease renewal.
	eventually(t, 3*time.Minute, "node "+node.Name+" not ready", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("still Ready")
	})
	notReady := time.Since(killedAt)
	if !silent {
		// The lost event bridge's connections were reset with its
		// processes: the load publishes through the other at once.
		require.Positive(t, load.ackedBetween(killedAt, time.Now()), "events are acknowledged while the node is lost")
	}

	// Known to be gone: out of service.
	taintedAt := time.Now()
	// The node lifecycle controller taints the node too: retried on a
	// conflict with its update.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, outOfServiceTaint)
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}))

	want := map[string]int{natsSelector: 3, eventBridgeSelector: 2, controllerSelector: 2, scalerSelector: 2}
	eventually(t, 5*time.Minute, "kfn's pods ready again, all on "+first, func() error {
		for sel, n := range want {
			ready := 0
			for _, p := range podsOf(t, sel) {
				if p.Spec.NodeName == node.Name {
					return fmt.Errorf("%s: pod %s still on %s", sel, p.Name, node.Name)
				}
				if podReady(&p) {
					ready++
				}
			}
			if ready < n {
				return fmt.Errorf("%s: %d of %d ready", sel, ready, n)
			}
		}
		return nil
	})
	rescheduled := time.Since(taintedAt)
	// After a silent loss the load's last request may still be waiting
	// for the lost event bridge (its client's 30 s timeout) when the
	// pods are back: publishing must go on within that, not at once.
	eventually(t, time.Minute, "events acknowledged after the node is lost", func() error {
		if n := load.ackedBetween(killedAt, time.Now()); n == 0 {
			return fmt.Errorf("none since the loss, %d s ago (%d attempts failed: %s)", int(time.Since(killedAt).Seconds()), len(load.failures()), lastFailure(load))
		}
		return nil
	})

	var newSink string
	eventually(t, 5*time.Minute, "the sink serves again on "+first, func() error {
		for _, p := range functionPods(t, ns, "sink") {
			if p.Spec.NodeName == first && podReady(&p) && platform.recorder.podCounts(fn)[p.Name] > 0 {
				newSink = p.Name
				return nil
			}
		}
		return fmt.Errorf("no ready sink pod on %s has received an event", first)
	})
	sinkBack := time.Since(taintedAt)

	load.waitAcked(t, load.count()+100)
	r := load.finish(t, fn, 3*natsFaultHeld(t), fmt.Sprintf("%s node %s (sink %s, then %s; stream leader after: %s)", how, node.Name, lostSink, newSink, streamLeader(t, "kfn-events")), start)
	t.Logf("longest publish outage from the loss on: %s (%d publish attempts failed from then on)", longestGap(r.ackedAt, killedAt).Round(time.Millisecond), failedSince(r.failed, killedAt))
	t.Logf("node loss timings: second node added and Ready %s, replicas moved to it %s after the start; NotReady %s after the kill; after the out-of-service taint kfn's pods ready on %s in %s and the sink serving there in %s",
		added.Round(time.Second), moved.Round(time.Second), notReady.Round(time.Second), first, rescheduled.Round(time.Second), sinkBack.Round(time.Second))
}

// admitMachine lets this process (on the machine, the first node's host
// network, at ip) publish to every event bridge, until the test ends. On
// one node a NetworkPolicy always admits the pod's own node; an event
// bridge on another node admits only what the chart's policy names (pods,
// unless networkPolicy.publisherFrom says more), as it would refuse a
// producer outside the cluster: the publish load is such a producer, and
// this policy (policies add up) is what its operator would write.
func admitMachine(t *testing.T, ip string) {
	t.Helper()
	labels := podsOf(t, eventBridgeSelector)[0].Labels
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-publish-from-the-machine", Namespace: install.Namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/component": labels["app.kubernetes.io/component"],
				"app.kubernetes.io/instance":  labels["app.kubernetes.io/instance"],
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}},
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: ip + "/32"}}},
			}},
		},
	}
	nps := platform.cluster.Clientset.NetworkingV1().NetworkPolicies(install.Namespace)
	_, err := nps.Create(t.Context(), np, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = nps.Delete(context.Background(), np.Name, metav1.DeleteOptions{}) })
}

// podOn returns the pod of kfn's with the label selector on node.
func podOn(t *testing.T, selector, node string) *corev1.Pod {
	t.Helper()
	for _, p := range podsOf(t, selector) {
		if p.Spec.NodeName == node {
			return &p
		}
	}
	t.Fatalf("no pod %s on %s", selector, node)
	return nil
}

// serves reports whether the pod has an established connection on its
// local port from peer, read in its network namespace through
// /proc/<pid>/net/tcp of one of its processes.
func serves(t *testing.T, pod *corev1.Pod, port int, peer string) bool {
	t.Helper()
	pids := podProcesses(t, pod.UID)
	require.NotEmpty(t, pids, "processes of pod %s on the node", pod.Name)
	// A server listening on both families shows IPv4 peers in tcp6, as
	// ::ffff:a.b.c.d.
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pids[len(pids)-1], file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			// sl local_address rem_address st ...
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "01" { // 01: ESTABLISHED
				continue
			}
			_, localPort, _ := strings.Cut(f[1], ":")
			remoteIP, _, _ := strings.Cut(f[2], ":")
			if p, err := strconv.ParseUint(localPort, 16, 16); err == nil && int(p) == port && procIP(remoteIP).String() == peer {
				return true
			}
		}
	}
	return false
}

// longestGap is the longest time without an acknowledged publish from
// the last acknowledgement before from on.
func longestGap(acked []time.Time, from time.Time) time.Duration {
	var gap time.Duration
	var prev time.Time
	for _, at := range acked {
		if !at.Before(from) && !prev.IsZero() {
			gap = max(gap, at.Sub(prev))
		}
		prev = at
	}
	return gap
}

// failedSince counts the attempts sent at or after from.
func failedSince(failed []attempt, from time.Time) int {
	n := 0
	for _, a := range failed {
		if !a.at.Before(from) {
			n++
		}
	}
	return n
}

// nodesOf lists the nodes that run kfn's pods with the label selector.
func nodesOf(t *testing.T, selector string) []string {
	t.Helper()
	var out []string
	for _, p := range podsOf(t, selector) {
		if !slices.Contains(out, p.Spec.NodeName) {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out
}

// podsOn lists the pods (namespace/name) on a node.
func podsOn(t *testing.T, node string) []string {
	t.Helper()
	list, err := platform.cluster.Clientset.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// functionPods lists a Function's pods that are not being deleted.
func functionPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	return livePods(t, ns, functionLabel+"="+name)
}

// cordon marks a node unschedulable or schedulable again; a cordoned
// node is uncordoned when the test ends.
func cordon(t *testing.T, node string, unschedulable bool) {
	t.Helper()
	set := func(ctx context.Context, v bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v)
		_, err := platform.cluster.Clientset.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	require.NoError(t, set(t.Context(), unschedulable))
	if unschedulable {
		t.Cleanup(func() { _ = set(context.Background(), false) })
	}
}

// lastFailure describes the load's last failed attempt ("none" without).
func lastFailure(l *load) string {
	f := l.failures()
	if len(f) == 0 {
		return "none"
	}
	a := f[len(f)-1]
	return fmt.Sprintf("the last at %s after %s: %d %v", a.at.Format("15:04:05.000"), a.took.Round(time.Millisecond), a.code, a.err)
}
