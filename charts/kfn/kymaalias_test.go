package chart_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// aliasRuns numbers the namespaces of TestKymaPublisherAliasLookup.
var aliasRuns int

// aliasOf returns the rendered eventing-publisher-proxy Service, or nil.
func aliasOf(t *testing.T, objs []*unstructured.Unstructured) *corev1.Service {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == "eventing-publisher-proxy" {
			svc := &corev1.Service{}
			mustConvert(t, o, svc)
			return svc
		}
	}
	return nil
}

func renderObjectsIn(t *testing.T, namespace string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := renderIn(t, namespace, vals)
	require.NoError(t, err)
	objs, err := decode(manifest)
	require.NoError(t, err)
	return objs
}

// TestKymaPublisherAliasRender checks the alias as `helm template` renders
// it (no cluster, so no lookup): installed in kyma-system, a Service of
// the event bridge's pods on port 80; asked for elsewhere, an ExternalName
// to the release's publisher; never without being asked or able.
func TestKymaPublisherAliasRender(t *testing.T) {
	alias := func(enabled any) map[string]any {
		return map[string]any{"kymaPublisherAlias": map[string]any{"enabled": enabled}}
	}

	assert.Nil(t, aliasOf(t, render(t, nil)), "auto without a cluster to ask: not made in another namespace")
	assert.Nil(t, aliasOf(t, renderObjectsIn(t, "kyma-system", alias(false))), "false: never")

	objs := renderObjectsIn(t, "kyma-system", nil)
	svc := aliasOf(t, objs)
	require.NotNil(t, svc, "auto, release in kyma-system: made")
	assert.Equal(t, "kyma-system", svc.Namespace)
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(80), svc.Spec.Ports[0].Port)
	assert.Equal(t, intstr.FromString("http"), svc.Spec.Ports[0].TargetPort)
	r := typed(t, objs)
	pods := selected(r, svc.Spec.Selector)
	require.Len(t, pods, 1)
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(r.deployments["kfn-eventbridge"].Spec.Template.Labels)), "it selects the event bridge")
	assert.True(t, servesPort(pods[0], "http"))

	svc = aliasOf(t, render(t, alias(true)))
	require.NotNil(t, svc, "true: made")
	assert.Equal(t, "kyma-system", svc.Namespace)
	assert.Equal(t, corev1.ServiceTypeExternalName, svc.Spec.Type)
	assert.Equal(t, "kfn-publisher."+releaseNamespace+".svc.cluster.local", svc.Spec.ExternalName)
	assert.Equal(t, releaseName, svc.Labels["app.kubernetes.io/instance"])

	other := alias(true)
	other["kymaPublisherAlias"].(map[string]any)["namespace"] = "eventing"
	assert.Equal(t, "eventing", aliasOf(t, render(t, other)).Namespace)

	port := alias(true)
	port["eventbridge"] = map[string]any{"service": map[string]any{"port": 8080}}
	_, err := renderManifest(t, port)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kymaPublisherAlias: an alias in namespace kyma-system is an ExternalName Service, which answers on port 80 only: set eventbridge.service.port to 80")

	_, err = renderManifest(t, alias("yes"))
	require.Error(t, err, "the schema refuses what is neither auto, true nor false")
}

// aliasRelease is the release name of helmInstall: not the other tests'
// (whose cluster-wide objects, applied without Helm's ownership
// annotations, a server dry-run would refuse to take over).
const aliasRelease = "kfnalias"

// helmInstall runs `helm install --dry-run=server` of the chart in
// namespace against the test API server, with lookups, and returns the
// release (manifest and notes).
func helmInstall(t *testing.T, namespace string, vals map[string]any) *release.Release {
	t.Helper()
	c := sharedCluster(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, c.KubeConfig, 0o600))
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, cfg.Init(flags, namespace, "memory"))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunServer
	install.ReleaseName = aliasRelease
	install.Namespace = namespace
	install.KubeVersion = kubeVersion(t)
	// The CRDs, which the chart renders, exist on the shared API server
	// without this release's ownership (other tests applied them): take
	// them, as helm install --take-ownership would (a dry run changes
	// nothing).
	install.TakeOwnership = true
	rel, err := install.Run(loadChart(t), copyValues(vals))
	require.NoError(t, err)
	r, ok := rel.(*release.Release)
	require.True(t, ok)
	return r
}

// TestKymaPublisherAliasLookup installs (server dry-run, as helm install
// --dry-run=server, which asks the cluster) with enabled "auto": no alias
// while kyma-system does not exist; an ExternalName alias once it does,
// which the API server accepts; none when kyma-system holds Kyma's own
// eventing-publisher-proxy, which the chart never takes over. NOTES says
// which.
func TestKymaPublisherAliasLookup(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Namespaces of their own per run (go test -count=N reuses the API
	// server); the alias's is kyma-system in a user's cluster.
	aliasRuns++
	ns := fmt.Sprintf("kfn-alias-%d", aliasRuns)
	kymaNS := fmt.Sprintf("kyma-system-%d", aliasRuns)
	vals := map[string]any{"kymaPublisherAlias": map[string]any{"namespace": kymaNS}}
	require.NoError(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	rel := helmInstall(t, ns, vals)
	objs, err := decode(rel.Manifest)
	require.NoError(t, err)
	assert.Nil(t, aliasOf(t, objs))
	assert.Contains(t, rel.Info.Notes, "Kyma's address:      not made: namespace "+kymaNS+" does not exist")

	kyma := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kymaNS}}
	require.NoError(t, c.Client.Create(ctx, kyma))
	rel = helmInstall(t, ns, vals)
	objs, err = decode(rel.Manifest)
	require.NoError(t, err)
	svc := aliasOf(t, objs)
	require.NotNil(t, svc, "kyma-system exists: the alias is made")
	assert.Equal(t, corev1.ServiceTypeExternalName, svc.Spec.Type)
	assert.Equal(t, aliasRelease+"-publisher."+ns+".svc.cluster.local", svc.Spec.ExternalName)
	assert.Equal(t, kymaNS, svc.Namespace)
	assert.Contains(t, rel.Info.Notes, "Kyma's address:      http://eventing-publisher-proxy."+kymaNS+"/publish (and /<app>/v1/events)")
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == "eventing-publisher-proxy" {
			require.NoError(t, c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll, client.FieldOwner(fieldOwner)),
				"the API server accepts the alias")
		}
	}

	// Kyma's own publisher Service is there: left alone.
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "eventing-publisher-proxy", Namespace: kymaNS},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": "eventing-publisher-proxy"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	require.NoError(t, c.Client.Create(ctx, theirs))
	rel = helmInstall(t, ns, vals)
	objs, err = decode(rel.Manifest)
	require.NoError(t, err)
	assert.Nil(t, aliasOf(t, objs))
	assert.Contains(t, rel.Info.Notes, "not made: namespace "+kymaNS+" has a Service eventing-publisher-proxy of its own")
}
