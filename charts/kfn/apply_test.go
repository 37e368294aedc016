package chart_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/test/testcluster"
)

// dryRuns numbers the namespaces of TestDryRunApply (go test -count=N runs
// it again on the same API server).
var dryRuns int

// fieldOwner is the field manager of the test's applies (helm's own is "helm").
const fieldOwner = "helm"

// warnings collects the API server's warnings (deprecations, Pod Security
// "would violate" messages) of a client's requests.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// warningClient is a client of c whose warnings land in the returned collector.
func warningClient(t testing.TB, c *testcluster.Cluster) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WarningHandler = w
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	require.NoError(t, err)
	return cl, w
}

// installCRDs applies the chart's CRDs (for real: the dry-run applies of the
// other objects need nothing of them, but the RBAC test does) and waits
// until they are served. It is idempotent.
func installCRDs(t testing.TB, ctx context.Context, c *testcluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	var names []string
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		require.NoError(t, c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership),
			"apply CRD %s", o.GetName())
		names = append(names, o.GetName())
	}
	require.NotEmpty(t, names, "the chart renders its CRDs")
	for _, n := range names {
		require.Eventually(t, func() bool {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}, 30*time.Second, 50*time.Millisecond, "CRD %s established", n)
	}
}

// restrictedNamespace creates a namespace that enforces the restricted Pod
// Security Standard, as a hardened cluster would for kfn-system.
func restrictedNamespace(t testing.TB, ctx context.Context, c *testcluster.Cluster, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	require.NoError(t, c.Client.Create(ctx, ns))
}

// TestDryRunApply applies every object of every value set to a real API
// server with server-side apply and dryRun=All, CRDs first, in a namespace
// that enforces the restricted Pod Security Standard: the API server must
// accept every object without a warning, and admit a Pod made of each pod
// template.
func TestDryRunApply(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, warns := warningClient(t, c)
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	require.NoError(t, err)
	v, err := disc.ServerVersion()
	require.NoError(t, err)
	want := kubeVersion(t)
	require.Equal(t, want.Major+"."+want.Minor, v.Major+"."+v.Minor, "the chart is rendered for the version of the test's API server")
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			dryRuns++
			ns := fmt.Sprintf("kfn-dry-run-%d", dryRuns)
			restrictedNamespace(t, ctx, c, ns)
			manifest, err := renderIn(t, ns, vs.values)
			require.NoError(t, err)
			objs, err := decode(manifest)
			require.NoError(t, err)
			installCRDs(t, ctx, c, objs)
			warns.take()

			var skipped []string
			for _, o := range objs {
				key := o.GetKind() + "/" + o.GetName()
				if o.GetAPIVersion() == "monitoring.coreos.com/v1" {
					// The Prometheus Operator's CRDs are not in the module
					// cache (no Go module of this repository ships them):
					// TestServiceMonitorsSelectMetricsPorts and
					// TestMonitoringObjects check these.
					skipped = append(skipped, key)
					continue
				}
				err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll, client.FieldOwner(fieldOwner), client.ForceOwnership)
				assert.NoError(t, err, "the API server refuses %s", key)
				assert.Empty(t, warns.take(), "the API server warns about %s", key)
			}
			r := typed(t, objs)
			for name, pt := range r.podTemplates() {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: ns, Labels: pt.Labels, Annotations: pt.Annotations}, Spec: *pt.Spec.DeepCopy()}
				if sts, ok := r.statefulSets[name]; ok {
					// The StatefulSet controller adds a volume per claim template.
					for _, claim := range sts.Spec.VolumeClaimTemplates {
						pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
							PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + pod.Name},
						}})
					}
				}
				err := cl.Create(ctx, pod, client.DryRunAll)
				assert.NoError(t, err, "Pod Security admission refuses a pod of %s", name)
				assert.Empty(t, warns.take(), "the API server warns about a pod of %s", name)
			}
			// The control: the namespace does enforce restricted.
			bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			err = cl.Create(ctx, bare, client.DryRunAll)
			require.Error(t, err, "a pod without a security context must be refused here")
			assert.Contains(t, err.Error(), "violates PodSecurity \"restricted:")
			warns.take()
			if len(skipped) > 0 {
				t.Logf("not applied (no CRD in this API server): %s", strings.Join(skipped, ", "))
			}
		})
	}
}

// TestServiceMonitorsSelectMetricsPorts stands in for the dry-run of the
// ServiceMonitors: each selects exactly one rendered Service in the
// release's namespace, and that Service has the port it scrapes.
func TestServiceMonitorsSelectMetricsPorts(t *testing.T) {
	r := typed(t, render(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "nats": map[string]any{"exporter": map[string]any{"enabled": true}}}))
	n := 0
	for _, o := range r.objs {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		n++
		assert.Equal(t, "monitoring.coreos.com/v1", o.GetAPIVersion())
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		require.Len(t, endpoints, 1)
		port, _, _ := unstructured.NestedString(endpoints[0].(map[string]any), "port")
		var matched []string
		for name, svc := range r.services {
			ok := true
			for k, v := range sel {
				ok = ok && svc.Labels[k] == v
			}
			if !ok {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if p.Name == port {
					matched = append(matched, name)
				}
			}
		}
		assert.Len(t, matched, 1, "ServiceMonitor %s scrapes port %q of exactly one Service", o.GetName(), port)
	}
	assert.Equal(t, 4, n, "controller, event bridge, scaler, NATS exporter")
}
