package cluster

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/test/node/install"
)

// What the fault scenarios share: a steady publish load and its accounting
// (acknowledged ids, failed attempts, the longest gap between two
// acknowledgements, the p99 of acknowledged publishes), the kill of one of
// kfn's pods (SIGKILL to its processes on the node), the node held
// against replacements (cordoned) while a fault must last, and
// what the node's processes show (which NATS server leads a stream, which
// scaler replica KEDA is connected to).

// faultInFlight is the maxInFlightMessages of the fault scenarios'
// Subscriptions: JetStream's MaxAckPending, so at most this many events
// are delivered and unacknowledged at any moment, across both dispatchers.
// An event is delivered twice only when its acknowledgement is lost (a
// killed dispatcher, or a killed NATS server leading the consumer), so one
// fault duplicates at most this many.
const faultInFlight = 10

// faultSink starts, in a new namespace, the recording Function the load's
// events reach (fn in the recorder) and its Subscription to
// order.created.v1 with faultInFlight, and waits until both are ready.
func faultSink(t *testing.T, prefix string) (ns, fn string) {
	t.Helper()
	ns = namespace(t, prefix)
	fn = ns + "-sink"
	apply(t, ns, recordingFunction("sink", fn, 200, ""))
	apply(t, ns, subscription(ns, "sink", "sink", "order.created.v1", map[string]string{"maxInFlightMessages": strconv.Itoa(faultInFlight)}))
	waitRunning(t, ns, "sink", 3*time.Minute)
	waitSubscriptionReady(t, ns, "sink")
	return ns, fn
}

// load publishes events at a steady pace (one every 20 ms, each retried
// with its id until acknowledged) and keeps what a fault costs.
type load struct {
	cancel func()
	wg     sync.WaitGroup

	mu        sync.Mutex
	acked     []string
	ackedAt   []time.Time
	failed    []attempt
	latencies []time.Duration
	lastAck   time.Time
	outage    time.Duration
}

// attempt is a publish that was not acknowledged: its answer (code 0 when
// the request failed, err then says why), when it was sent and how long
// it took.
type attempt struct {
	code int
	err  error
	at   time.Time
	took time.Duration
}

// loadResult is what a load cost: the acknowledged ids and when, the attempts that
// were not acknowledged, the longest time between two acknowledgements
// (the gap an outage makes; about 20 ms in steady state) and the p99 of
// the acknowledged publish requests.
type loadResult struct {
	acked   []string
	ackedAt []time.Time
	failed  []attempt
	outage  time.Duration
	p99     time.Duration
}

// startLoad publishes order.created.v1 events from source shop, ids
// <ns>-00000, <ns>-00001..., until stop or the end of the test.
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
				// Each event its own partition key: the events spread over
				// the event stream's partitions, when it has more than one.
				code, _, _, err := publishEventWith("", "order.created.v1", "shop", id, `{}`, http.Header{"Ce-Partitionkey": {id}})
				now := time.Now()
				l.mu.Lock()
				if err == nil && code/100 == 2 {
					l.acked = append(l.acked, id)
					l.ackedAt = append(l.ackedAt, now)
					l.latencies = append(l.latencies, now.Sub(began))
					l.outage = max(l.outage, now.Sub(l.lastAck))
					l.lastAck = now
					l.mu.Unlock()
					break
				}
				if ctx.Err() == nil {
					l.failed = append(l.failed, attempt{code: code, err: err, at: began, took: now.Sub(began)})
				}
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

// ackedBetween counts the publishes acknowledged in (from, to).
func (l *load) ackedBetween(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.ackedAt {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// failures returns the attempts not acknowledged so far.
func (l *load) failures() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.failed)
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

// stop ends the load and returns what it cost.
func (l *load) stop() loadResult {
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
	return loadResult{acked: slices.Clone(l.acked), ackedAt: slices.Clone(l.ackedAt), failed: slices.Clone(l.failed), outage: l.outage, p99: p99}
}

// finish stops the load, requires that fn received every acknowledged
// event and at most maxDups duplicate deliveries, and logs the scenario's
// figures (what names the fault).
func (l *load) finish(t *testing.T, fn string, maxDups int, what string, start time.Time) loadResult {
	t.Helper()
	r := l.stop()
	require.NoError(t, platform.recorder.waitAll(t.Context(), fn, r.acked, 5*time.Minute))
	dups := 0
	for _, n := range platform.recorder.counts(fn) {
		dups += n - 1
	}
	codes := map[int]int{}
	for _, a := range r.failed {
		codes[a.code]++
	}
	t.Logf("%s: %d events acknowledged, all delivered; failed publish attempts by status (0: no answer) %v; longest publish outage %s; publish p99 %s; %d duplicate deliveries (bound %d); scenario took %s",
		what, len(r.acked), codes, r.outage.Round(time.Millisecond), r.p99.Round(time.Millisecond), dups, maxDups, time.Since(start).Round(time.Second))
	require.LessOrEqual(t, dups, maxDups, "duplicate deliveries")
	return r
}

// requireHA skips t unless the install runs the chart's profile ha (3
// NATS servers, R3 streams).
// natsFaultHeld is how many of a fault scenario's events can be delivered
// and unacknowledged at once across the install, the duplicates a NATS
// server's loss may cause (the acknowledgements it held): each partition's
// consumer holds faultInFlight (JetStream's MaxAckPending), and each event
// bridge replica holds the Subscription's deliveries to faultInFlight
// across partitions, so faultInFlight times the fewer of the partitions
// and the event bridge replicas (profile ha: 1 partition, 2 replicas).
func natsFaultHeld(t *testing.T) int {
	t.Helper()
	d, err := platform.cluster.Clientset.AppsV1().Deployments(install.Namespace).Get(t.Context(), "kfn-eventbridge", metav1.GetOptions{})
	require.NoError(t, err)
	return faultInFlight * max(min(len(eventStreams(t)), int(*d.Spec.Replicas)), 1)
}

func requireHA(t *testing.T) {
	t.Helper()
	sts, err := platform.cluster.Clientset.AppsV1().StatefulSets(install.Namespace).Get(t.Context(), "kfn-nats", metav1.GetOptions{})
	require.NoError(t, err)
	if *sts.Spec.Replicas < 3 {
		t.Skipf("needs the chart's profile ha (3 NATS servers); the install runs %d (%s)", *sts.Spec.Replicas, install.ProfileEnv)
	}
}

// streamLeader asks the NATS servers' monitoring port which server leads
// the stream (server names are pod names); "" while none does.
func streamLeader(t *testing.T, stream string) string {
	t.Helper()
	pods, err := platform.cluster.Clientset.CoreV1().Pods(install.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=nats"})
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

// podsOf lists kfn's pods with the label selector that are not being
// deleted.
func podsOf(t *testing.T, selector string) []corev1.Pod {
	t.Helper()
	return livePods(t, install.Namespace, selector)
}

// livePods lists the pods of namespace ns with the label selector that
// are not being deleted.
func livePods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := platform.cluster.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// crash kills the processes of one of kfn's pods on the node with
// SIGKILL, no SIGTERM first: a crash. Deleting the pod would not be one:
// the kubelet sends SIGTERM and gives even a pod deleted with grace period
// 0 two seconds before SIGKILL, in which NATS, the controller's leader
// election and the dispatchers shut down cleanly. The pod's sandbox (its
// pause process, which holds the network namespace) is left, so the
// kubelet restarts the containers in the same pod, as after a crash. It
// returns the pod as it was.
func crash(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := platform.cluster.Clientset.CoreV1().Pods(install.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var killed []int
	for _, pid := range podProcesses(t, p.UID) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) == "pause" {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	require.NotEmpty(t, killed, "processes of pod %s on the node", name)
	t.Logf("killed %s: SIGKILL to its processes %v", name, killed)
	return p
}

// restarts is the sum of a pod's containers' restart counts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// killPod crashes one of kfn's pods (crash) and waits until the kubelet
// has restarted its containers and it is ready again.
func killPod(t *testing.T, name string) {
	t.Helper()
	waitRestarted(t, crash(t, name))
}

// waitRestarted waits until the pod (as it was before a crash) has
// restarted containers and is ready.
func waitRestarted(t *testing.T, before *corev1.Pod) {
	t.Helper()
	pods := platform.cluster.Clientset.CoreV1().Pods(install.Namespace)
	eventually(t, 3*time.Minute, before.Name+" restarted and ready", func() error {
		p, err := pods.Get(t.Context(), before.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != before.UID || restarts(p) <= restarts(before) {
			return fmt.Errorf("not restarted (%d restarts)", restarts(p))
		}
		if !podReady(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
}

// killAndRemove crashes one of kfn's pods (crash) and deletes it at once,
// so that its containers are not restarted where they were: the pod is
// gone, as with its node, and its controller makes a new one (held back
// while holdReplacements holds). It returns the killed pod's UID.
func killAndRemove(t *testing.T, name string) types.UID {
	t.Helper()
	p := crash(t, name)
	err := platform.cluster.Clientset.CoreV1().Pods(install.Namespace).Delete(t.Context(), name,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
	require.NoError(t, err)
	return p.UID
}

// waitReplaced waits until the pod name (a StatefulSet's) is ready again
// in a pod other than uid.
func waitReplaced(t *testing.T, name string, uid types.UID) {
	t.Helper()
	pods := platform.cluster.Clientset.CoreV1().Pods(install.Namespace)
	eventually(t, 3*time.Minute, name+" replaced and ready", func() error {
		p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == uid {
			return fmt.Errorf("still the killed pod")
		}
		if !podReady(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// kill crashes every one of kfn's pods with the label selector (crash)
// and waits until each is restarted and ready.
func kill(t *testing.T, selector string) {
	t.Helper()
	list := podsOf(t, selector)
	require.NotEmpty(t, list, "pods %s", selector)
	var before []*corev1.Pod
	for _, p := range list {
		before = append(before, crash(t, p.Name))
	}
	for _, p := range before {
		waitRestarted(t, p)
	}
}

// waitReadyPods waits until n ready pods match the selector, none of
// them with a UID in old.
func waitReadyPods(t *testing.T, selector string, n int, old map[types.UID]bool) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("%d new ready pods for %s", n, selector), func() error {
		ready := 0
		for _, p := range podsOf(t, selector) {
			if !old[p.UID] && podReady(&p) {
				ready++
			}
		}
		if ready < n {
			return fmt.Errorf("%d new ready pods", ready)
		}
		return nil
	})
}

// holdReplacements cordons the node, so that a pod killed now is not
// replaced (its replacement waits, Pending) until the returned release
// uncordons it; release also runs when the test ends. It is how a fault is
// made to last: on one node there is no other node for the replacement.
// Pods that already run are untouched.
func holdReplacements(t *testing.T) (release func()) {
	t.Helper()
	nodes, err := platform.cluster.Clientset.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	name := nodes.Items[0].Name
	set := func(ctx context.Context, unschedulable bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := platform.cluster.Clientset.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	require.NoError(t, set(t.Context(), true))
	t.Logf("node %s cordoned: killed pods are not replaced", name)
	var once sync.Once
	release = func() {
		once.Do(func() {
			require.NoError(t, set(context.Background(), false))
			t.Logf("node %s uncordoned", name)
		})
	}
	t.Cleanup(release)
	return release
}

// leaseHolder returns the holder identity of kfn's Lease name,
// <pod>_<uuid> as controller-runtime writes it (a restarted process
// takes a new uuid), and the holder's pod.
func leaseHolder(t *testing.T, name string) (identity, pod string) {
	t.Helper()
	l, err := platform.cluster.Clientset.CoordinationV1().Leases(install.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	if l.Spec.HolderIdentity == nil {
		return "", ""
	}
	pod, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
	return *l.Spec.HolderIdentity, pod
}

// podProcesses returns the processes of a pod on the node, found in the
// kubelet's cgroups (cgroupfs driver, under the pids hierarchy).
func podProcesses(t *testing.T, uid types.UID) []int {
	t.Helper()
	var pids []int
	dir := "pod" + string(uid)
	err := filepath.WalkDir("/sys/fs/cgroup/pids", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !strings.Contains(path, dir) {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return pids
}

// connectedPeers returns the remote IPs of the pod's established TCP
// connections to a remote port, read in the pod's network namespace
// through /proc/<pid>/net/tcp and tcp6 of one of its processes.
func connectedPeers(t *testing.T, pod *corev1.Pod, port int) map[string]bool {
	t.Helper()
	pids := podProcesses(t, pod.UID)
	require.NotEmpty(t, pids, "processes of pod %s on the node", pod.Name)
	peers := map[string]bool{}
	for _, file := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pids[len(pids)-1], file))
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			// sl local_address rem_address st ...; addresses are hex
			// IP:port, the IP in host byte order per 32-bit word.
			fields := strings.Fields(s.Text())
			if len(fields) < 4 || fields[3] != "01" { // 01: ESTABLISHED
				continue
			}
			ipHex, portHex, ok := strings.Cut(fields[2], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(portHex, 16, 16); err != nil || int(p) != port {
				continue
			}
			if ip := procIP(ipHex); ip != nil {
				peers[ip.String()] = true
			}
		}
		f.Close()
	}
	return peers
}

// procIP decodes an address of /proc/net/tcp(6): 32-bit words in little
// endian (x86, the node's architecture).
func procIP(h string) net.IP {
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}
