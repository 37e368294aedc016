package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// peer is a pod that opens a connection: its labels and its namespace's.
type peer struct {
	labels    map[string]string
	namespace string
}

// admits reports whether the ingress rules of np let p in on the
// container port port of a pod np selects, with NetworkPolicy's meaning
// (a podSelector alone: np's namespace; a namespaceSelector alone: every
// pod there; both: those pods there; no from: anyone). A namespace's only
// label here is kubernetes.io/metadata.name, which the API server sets.
func admits(t *testing.T, np networkingv1.NetworkPolicy, port corev1.ContainerPort, p peer) bool {
	t.Helper()
	match := func(sel *metav1.LabelSelector, set map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		require.NoError(t, err)
		return s.Matches(labels.Set(set))
	}
	nsLabels := map[string]string{"kubernetes.io/metadata.name": p.namespace}
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, rp := range rule.Ports {
			if rp.Port == nil || rp.Port.String() == port.Name || rp.Port.IntValue() == int(port.ContainerPort) {
				portOK = true
			}
		}
		if !portOK {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, f := range rule.From {
			require.Nil(t, f.IPBlock, "the chart's ingress names pods, not addresses")
			nsOK := f.NamespaceSelector == nil && p.namespace == np.Namespace ||
				f.NamespaceSelector != nil && match(f.NamespaceSelector, nsLabels)
			podOK := f.PodSelector == nil || match(f.PodSelector, p.labels)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

// policyOf returns the rendered NetworkPolicy name.
func policyOf(t *testing.T, r rendered, name string) networkingv1.NetworkPolicy {
	t.Helper()
	obj := find(r.objs, "NetworkPolicy", name)
	require.NotNil(t, obj, "NetworkPolicy %s", name)
	var np networkingv1.NetworkPolicy
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &np))
	return np
}

// portOf returns the container port named name of a pod template.
func portOf(t *testing.T, spec corev1.PodSpec, name string) corev1.ContainerPort {
	t.Helper()
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p
			}
		}
	}
	t.Fatalf("no container port %s", name)
	return corev1.ContainerPort{}
}

// TestNetworkPoliciesByDefault renders the chart with its defaults and
// asks each internal port who gets in: NATS's clients only from the event
// bridge and the scaler of the release's namespace, its routes only from
// NATS servers, its monitoring from no pod, the scaler's gRPC only from
// KEDA's operator in namespace keda, the event bridge's admin port from
// no pod; the publisher from any pod. The pods of another namespace that
// carry the labels of kfn's components or of KEDA's operator are kept out
// (a label is anyone's to set on their own pods; a namespace's name is
// not).
func TestNetworkPoliciesByDefault(t *testing.T) {
	r := typed(t, render(t, nil))
	assert.Equal(t, 4, kinds(r.objs)["NetworkPolicy"], "on by default: controller, event bridge, scaler, NATS")

	ns := r.deployments["kfn-eventbridge"].Namespace
	require.NotEmpty(t, ns)
	bridgePod := r.deployments["kfn-eventbridge"].Spec.Template
	scalerPod := r.deployments["kfn-scaler"].Spec.Template
	natsPod := r.statefulSets["kfn-nats"].Spec.Template
	controllerPod := r.deployments["kfn-controller"].Spec.Template
	bridge := peer{bridgePod.Labels, ns}
	scaler := peer{scalerPod.Labels, ns}
	nats := peer{natsPod.Labels, ns}
	controller := peer{controllerPod.Labels, ns}
	function := peer{map[string]string{"serverless.kyma-project.io/function-name": "f"}, "team-a"}
	// Hostile: another namespace's pods dressed as kfn's or KEDA's.
	fakeBridge := peer{bridgePod.Labels, "team-a"}
	fakeNATS := peer{natsPod.Labels, "team-a"}
	fakeKEDA := peer{map[string]string{"app": "keda-operator", "app.kubernetes.io/name": "keda-operator"}, "team-a"}
	keda := peer{map[string]string{"app": "keda-operator", "app.kubernetes.io/name": "keda-operator", "name": "keda-operator"}, "keda"}
	kedaOther := peer{map[string]string{"app": "keda-operator-metrics-apiserver"}, "keda"}

	natsNP := policyOf(t, r, "kfn-nats")
	scalerNP := policyOf(t, r, "kfn-scaler")
	bridgeNP := policyOf(t, r, "kfn-eventbridge")
	for _, c := range []struct {
		what string
		np   networkingv1.NetworkPolicy
		port corev1.ContainerPort
		in   []peer
		kept []peer
	}{
		{"NATS clients", natsNP, portOf(t, natsPod.Spec, "client"), []peer{bridge, scaler}, []peer{controller, nats, function, fakeBridge, keda}},
		{"NATS routes", natsNP, portOf(t, natsPod.Spec, "cluster"), []peer{nats}, []peer{bridge, scaler, function, fakeNATS}},
		{"NATS monitoring", natsNP, portOf(t, natsPod.Spec, "monitor"), nil, []peer{bridge, scaler, nats, controller, function}},
		{"scaler gRPC", scalerNP, portOf(t, scalerPod.Spec, "grpc"), []peer{keda}, []peer{fakeKEDA, kedaOther, bridge, function}},
		{"event bridge admin", bridgeNP, portOf(t, bridgePod.Spec, "admin"), nil, []peer{bridge, scaler, controller, nats, function, keda}},
		{"publisher", bridgeNP, portOf(t, bridgePod.Spec, "http"), []peer{function, bridge, keda}, nil},
	} {
		for _, p := range c.in {
			assert.True(t, admits(t, c.np, c.port, p), "%s: %v of %s gets in", c.what, p.labels, p.namespace)
		}
		for _, p := range c.kept {
			assert.False(t, admits(t, c.np, c.port, p), "%s: %v of %s is kept out", c.what, p.labels, p.namespace)
		}
	}
}

// TestNetworkPolicyPeersFromValues: the values that name peers are
// obeyed; scalerFrom empty lets any pod in (the documented escape), and
// natsMonitoringFrom lets its peers reach NATS's monitoring port, no other.
func TestNetworkPolicyPeersFromValues(t *testing.T) {
	prom := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}
	r := typed(t, render(t, map[string]any{"networkPolicy": map[string]any{
		"scalerFrom":         []any{},
		"natsMonitoringFrom": []any{prom},
	}}))
	natsPod := r.statefulSets["kfn-nats"].Spec.Template
	scalerPod := r.deployments["kfn-scaler"].Spec.Template
	anyPod := peer{map[string]string{"x": "y"}, "team-a"}
	promPod := peer{map[string]string{"app": "prometheus"}, "monitoring"}
	assert.True(t, admits(t, policyOf(t, r, "kfn-scaler"), portOf(t, scalerPod.Spec, "grpc"), anyPod))
	natsNP := policyOf(t, r, "kfn-nats")
	assert.True(t, admits(t, natsNP, portOf(t, natsPod.Spec, "monitor"), promPod))
	assert.False(t, admits(t, natsNP, portOf(t, natsPod.Spec, "monitor"), anyPod))
	assert.False(t, admits(t, natsNP, portOf(t, natsPod.Spec, "client"), promPod))

	off := render(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}})
	assert.Zero(t, kinds(off)["NetworkPolicy"])
}
