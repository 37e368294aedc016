package install

import (
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// kedaConfig is KEDA's config directory in the module the main module
// requires: the same version test/node/assets.sh builds from e2e/keda.
func kedaConfig(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2").Output()
	require.NoError(t, err, "find the keda module")
	return filepath.Join(strings.TrimSpace(string(out)), "config")
}

func TestKEDAObjectsRunTheLocalImage(t *testing.T) {
	objs, err := kedaObjects(kedaConfig(t), "localhost/kfn-cluster/keda:v2.21.0")
	require.NoError(t, err)
	kinds := map[string][]string{}
	for _, o := range objs {
		kinds[o.GetKind()] = append(kinds[o.GetKind()], o.GetName())
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		require.NotEmpty(t, containers)
		for _, c := range containers {
			m := c.(map[string]any)
			assert.Equal(t, "localhost/kfn-cluster/keda:v2.21.0", m["image"], o.GetName())
			assert.Equal(t, "Never", m["imagePullPolicy"], o.GetName())
		}
	}
	assert.ElementsMatch(t, []string{"keda-operator", "keda-metrics-apiserver"}, kinds["Deployment"])
	assert.Contains(t, kinds["CustomResourceDefinition"], "scaledobjects.keda.sh")
	assert.Contains(t, kinds["APIService"], "v1beta1.external.metrics.k8s.io")
	assert.Empty(t, kinds["ValidatingWebhookConfiguration"], "the minimal set has no admission webhooks")
}

func TestKEDAObjectsNeedKEDAsManifests(t *testing.T) {
	_, err := kedaObjects(t.TempDir(), "x")
	assert.ErrorContains(t, err, "render KEDA's manifests")
}

// TestLocalValuesInstallTheLocalImages renders the chart with LocalValues
// (its schema checks them) and finds every pod on the imported images.
func TestLocalValuesInstallTheLocalImages(t *testing.T) {
	ch, err := loader.Load("../../../charts/kfn")
	require.NoError(t, err)
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = Release
	install.Namespace = Namespace
	install.KubeVersion, err = common.ParseKubeVersion("v1.36.4")
	require.NoError(t, err)
	rel, err := install.Run(ch, LocalValues(LocalImages{Registry: "localhost/kfn", Tag: "dev", NATSRepository: "localhost/kfn-cluster/nats", NATSTag: "v2.15.2"}, "ha"))
	require.NoError(t, err)
	objs, err := singlenode.DecodeObjects([]byte(rel.(*release.Release).Manifest))
	require.NoError(t, err)
	images := map[string]bool{}
	var policies int
	var cpu, pods int64
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" {
			policies++
		}
		var replicas int64
		if n, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); ok {
			replicas = int64(toFloat(n))
		}
		pods += replicas
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			images[c.(map[string]any)["image"].(string)] = true
			if req, ok, _ := unstructured.NestedString(c.(map[string]any), "resources", "requests", "cpu"); ok {
				q := resource.MustParse(req)
				cpu += replicas * q.MilliValue()
			}
		}
	}
	assert.Equal(t, int64(9), pods, "profile ha: 3 NATS servers and 2 of each other component")
	assert.LessOrEqual(t, cpu, int64(550), "kfn's pods ask for no more CPU on the 2-core node than the small profile with the chart's requests")
	assert.Equal(t, map[string]bool{"localhost/kfn/kfn:dev": true, "localhost/kfn-cluster/nats:v2.15.2": true}, images)
	assert.Positive(t, policies, "NetworkPolicies on")
	assert.Contains(t, rel.(*release.Release).Manifest, "localhost/kfn/runtime-nodejs22:dev", "the controller runs Functions on the local runtime images")
}

// toFloat reads a decoded YAML number, integer or not.
func toFloat(n any) float64 {
	switch v := n.(type) {
	case int64:
		return float64(v)
	case int:
		return float64(v)
	case float64:
		return v
	}
	return 0
}
