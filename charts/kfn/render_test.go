package chart_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Release name and namespace of every rendering in these tests.
const (
	releaseName      = "kfn"
	releaseNamespace = "kfn-system"
)

// testKubeVersion is the Kubernetes version the chart is rendered for: the
// API server of test/testcluster. Helm's SDK assumes v1.20 inside test
// binaries, below the chart's kubeVersion.
const testKubeVersion = "v1.36.0"

func kubeVersion(t testing.TB) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion(testKubeVersion)
	require.NoError(t, err)
	return v
}

// loadChart loads the chart in the package's directory (go test runs tests
// there), as helm install charts/kfn does.
func loadChart(t testing.TB) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(".")
	require.NoError(t, err, "load the chart")
	return ch
}

// renderManifest renders the chart with vals over values.yaml as
// `helm template --include-crds` does (no cluster), values.schema.json
// included. It returns the manifest, or the error helm install would show.
func renderManifest(t testing.TB, vals map[string]any) (string, error) {
	t.Helper()
	return renderIn(t, releaseNamespace, vals)
}

func renderIn(t testing.TB, namespace string, vals map[string]any) (string, error) {
	t.Helper()
	return renderWithAPIs(t, namespace, vals)
}

// kedaAPI is the API of KEDA's that the chart looks for (as helm does in a
// cluster where KEDA is installed).
const kedaAPI = "keda.sh/v1alpha1/ClusterTriggerAuthentication"

// renderWithAPIs renders as renderIn, in a cluster that also serves apis
// (helm template --api-versions).
func renderWithAPIs(t testing.TB, namespace string, vals map[string]any, apis ...string) (string, error) {
	t.Helper()
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.Replace = true
	install.IncludeCRDs = true
	install.KubeVersion = kubeVersion(t)
	install.APIVersions = apis
	rel, err := install.Run(loadChart(t), copyValues(vals))
	if err != nil {
		return "", err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return "", fmt.Errorf("unexpected release type %T", rel)
	}
	return r.Manifest, nil
}

// render renders the chart and decodes every object; it fails t when the
// chart does not render.
func render(t testing.TB, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := renderManifest(t, vals)
	require.NoError(t, err, "render the chart")
	objs, err := decode(manifest)
	require.NoError(t, err)
	return objs
}

// decode splits a multi-document YAML manifest into objects, skipping empty documents.
func decode(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode manifest: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
}

// copyValues deep-copies nested maps, since helm writes into the values it
// is given.
func copyValues(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		if m, ok := x.(map[string]any); ok {
			out[k] = copyValues(m)
			continue
		}
		out[k] = x
	}
	return out
}

// find returns the rendered object of that kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// kinds counts the rendered objects by kind.
func kinds(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetKind()]++
	}
	return out
}
