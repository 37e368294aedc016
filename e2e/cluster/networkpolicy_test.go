package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/test/node/install"
)

// probeImage holds the probes' python3: kfn's python312 runtime image,
// imported into the node (never pulled).
const probeImage = "localhost/kfn/runtime-python312:dev"

// probeScript tries every target of PROBE_TARGETS (name=host:port,...)
// once a second and prints one line per try: "probe SEQ NAME ok FIRST-LINE"
// when the connection opened and the other side answered (a NATS server's
// INFO, an HTTP status line; what it sends first to "GET /"), "probe SEQ
// NAME dropped ERROR" when it did not open within a second.
const probeScript = `
import os, socket, time
targets = [t.split("=", 1) for t in os.environ["PROBE_TARGETS"].split(",")]
seq = 0
while True:
    seq += 1
    for name, addr in targets:
        host, port = addr.rsplit(":", 1)
        try:
            s = socket.create_connection((host, int(port)), timeout=1)
        except OSError as e:
            print("probe", seq, name, "dropped", type(e).__name__, flush=True)
            continue
        try:
            s.settimeout(3)
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            first = s.recv(200).split(b"\n")[0].decode("ascii", "replace").strip()
            print("probe", seq, name, "ok", first or "(closed)", flush=True)
        except OSError as e:
            print("probe", seq, name, "ok", "(opened; then", type(e).__name__ + ")", flush=True)
        finally:
            s.close()
    time.sleep(1)
`

// startProbe runs a pod named name in ns, under the restricted Pod
// Security Standard and its own ServiceAccount (no token), that tries
// each target (name to host:port) once a second; probeResults reads what
// it found.
func startProbe(t *testing.T, ns, name string, targets map[string]string) {
	t.Helper()
	ctx := t.Context()
	cs := platform.cluster.Clientset
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var list []string
	for n, addr := range targets {
		list = append(list, n+"="+addr)
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			ServiceAccountName:            name,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"python3", "-u", "-c", probeScript},
				Env:     []corev1.EnvVar{{Name: "PROBE_TARGETS", Value: strings.Join(list, ",")}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// probeResults returns, per target, the results of a probe pod's tries in
// order ("ok" or "dropped"), and its log for messages.
func probeResults(ns, name string) (map[string][]string, string, error) {
	raw, err := platform.cluster.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		return nil, "", err
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "probe" {
			out[f[2]] = append(out[f[2]], f[3])
		}
	}
	return out, string(raw), nil
}

// lastAre reports whether the last n results are all want.
func lastAre(results []string, n int, want string) bool {
	if len(results) < n {
		return false
	}
	for _, r := range results[len(results)-n:] {
		if r != want {
			return false
		}
	}
	return true
}

// awaitProbe waits until, for every target of want, the probe's last n
// tries all came out as want says ("ok" or "dropped"), and then until it
// has tried n more times: a target that was dropped must not open once in
// them (the outcome holds; it was no moment in which the enforcer had not
// yet learnt a policy or a pod), one that was served must be served at
// the last try (a single slow connect on a busy machine is no finding).
func awaitProbe(t *testing.T, ns, name string, n int, d time.Duration, want map[string]string) {
	t.Helper()
	var settled map[string]int
	eventually(t, d, fmt.Sprintf("probe %s/%s settles on %v", ns, name, want), func() error {
		res, log, err := probeResults(ns, name)
		if err != nil {
			return err
		}
		for target, w := range want {
			if !lastAre(res[target], n, w) {
				return fmt.Errorf("%s: want the last %d tries %s, have %v\n%s", target, n, w, res[target], lastBytes(log, 2000))
			}
		}
		settled = map[string]int{}
		for target := range want {
			settled[target] = len(res[target])
		}
		return nil
	})
	eventually(t, time.Duration(n)*5*time.Second+30*time.Second, fmt.Sprintf("probe %s/%s holds %v", ns, name, want), func() error {
		res, log, err := probeResults(ns, name)
		if err != nil {
			return err
		}
		for target, w := range want {
			after := res[target][settled[target]:]
			if w == "dropped" && slices.Contains(after, "ok") {
				t.Fatalf("%s of probe %s/%s: opened after it had been dropped %d times\n%s", target, ns, name, n, lastBytes(log, 2000))
			}
			if len(after) < n {
				return fmt.Errorf("%s: %d tries since it settled", target, len(after))
			}
			if w == "ok" && after[len(after)-1] != "ok" {
				return fmt.Errorf("%s: the last try was %s", target, after[len(after)-1])
			}
		}
		return nil
	})
}

// lastBytes returns the last n bytes of s.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// podAddress returns host:port of a running pod's container port named
// port.
func podAddress(t *testing.T, pod corev1.Pod, port string) string {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.ContainerPort)))
			}
		}
	}
	t.Fatalf("pod %s has no port named %s", pod.Name, port)
	return ""
}

// runningPod returns a running pod of kfn's component.
func runningPod(t *testing.T, component string) corev1.Pod {
	t.Helper()
	list, err := platform.cluster.Clientset.CoreV1().Pods(install.Namespace).List(t.Context(),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	require.NoError(t, err)
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p
		}
	}
	t.Fatalf("no running %s pod among %d", component, len(list.Items))
	return corev1.Pod{}
}

// TestNetworkPolicyIsEnforced shows that the node enforces NetworkPolicy
// (kube-network-policies; the CNI bridge plugin enforces none): a server
// whose policy lets in one namespace only answers a probe from that
// namespace, and drops the connections of a probe from another, which
// runs the same program; both settle within a minute and hold for five
// more tries. About 30 s.
func TestNetworkPolicyIsEnforced(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	server, allowed, denied := namespace(t, "np-server"), namespace(t, "np-allowed"), namespace(t, "np-denied")
	ctx := t.Context()
	cs := platform.cluster.Clientset
	_, err := cs.NetworkingV1().NetworkPolicies(server).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "only-" + allowed},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8080))}},
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": allowed}}}},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The server: Python's HTTP server, in a probe's pod spec.
	_, err = cs.CoreV1().Pods(server).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Labels: map[string]string{"app": "server"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "server", Image: probeImage, ImagePullPolicy: corev1.PullNever,
				Command:    []string{"python3", "-m", "http.server", "8080"},
				WorkingDir: "/tmp",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var addr string
	eventually(t, 2*time.Minute, "the server runs", func() error {
		p, err := cs.CoreV1().Pods(server).Get(ctx, "server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s, address %q", p.Status.Phase, p.Status.PodIP)
		}
		addr = net.JoinHostPort(p.Status.PodIP, "8080")
		return nil
	})
	startProbe(t, allowed, "probe", map[string]string{"server": addr})
	startProbe(t, denied, "probe", map[string]string{"server": addr})
	awaitProbe(t, allowed, "probe", 5, 2*time.Minute, map[string]string{"server": "ok"})
	awaitProbe(t, denied, "probe", 5, time.Minute, map[string]string{"server": "dropped"})
	eventually(t, 30*time.Second, "the allowed probe is still served", func() error {
		res, _, err := probeResults(allowed, "probe")
		if err != nil {
			return err
		}
		if !lastAre(res["server"], 1, "ok") {
			return fmt.Errorf("last tries %v", res["server"])
		}
		return nil
	})
}

// TestOtherNamespacesReachNoInternalPort is issue 37's proof that a pod of
// another namespace, with its own ServiceAccount and no rights in kfn's,
// reaches none of kfn's internal ports by pod address under the chart's
// default NetworkPolicies: NATS (clients, routes, monitoring), the event
// bridge's dead-letter admin API and the scaler's gRPC port all drop its
// connections, while the publisher on the same event bridge pod answers
// it (the pod has a network; the drops are the policies) and the event
// bridge's own calls to NATS keep working (a publish is acknowledged,
// which needs NATS's). About 60 s (each try of a dropped port waits 1 s).
func TestOtherNamespacesReachNoInternalPort(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "np-outsider")
	nats, bridge, scaler := runningPod(t, "nats"), runningPod(t, "eventbridge"), runningPod(t, "scaler")
	targets := map[string]string{
		"nats-client":     podAddress(t, nats, "client"),
		"nats-routes":     podAddress(t, nats, "cluster"),
		"nats-monitoring": podAddress(t, nats, "monitor"),
		"bridge-admin":    podAddress(t, bridge, "admin"),
		"scaler-grpc":     podAddress(t, scaler, "grpc"),
		"publisher":       podAddress(t, bridge, "http"),
	}
	startProbe(t, ns, "outsider", targets)
	want := map[string]string{"publisher": "ok"}
	for name := range targets {
		if name != "publisher" {
			want[name] = "dropped"
		}
	}
	awaitProbe(t, ns, "outsider", 3, 2*time.Minute, want)
	code, body, err := publishEvent("order.outsider.v1", "shop", "np-outsider-"+suffix(), `{}`)
	require.NoError(t, err)
	require.Equal(t, 2, code/100, "the publisher's publish through NATS: %s", body)
}
