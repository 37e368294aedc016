package chart_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// TestCRDsAreTheGeneratedOnes holds the chart's files/crds, which the
// chart renders, to the CRDs generated into api/crds (which kfn dev,
// offline admission and the tests use): the same files, byte for byte; and
// the rendered CRDs to those files, with only the chart's labels and, with
// crds.keep (the default), Helm's keep policy added.
func TestCRDsAreTheGeneratedOnes(t *testing.T) {
	generated, err := filepath.Glob("../../api/crds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, generated)
	inChart, err := filepath.Glob("files/crds/*.yaml")
	require.NoError(t, err)
	names := func(paths []string) (out []string) {
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	require.Equal(t, names(generated), names(inChart), "run make generate")
	rendered := map[string]*unstructured.Unstructured{}
	for _, o := range render(t, nil) {
		if o.GetKind() == "CustomResourceDefinition" {
			rendered[o.GetName()] = o
		}
	}
	require.Len(t, rendered, len(generated), "the chart renders every CRD")
	for _, g := range generated {
		want, err := os.ReadFile(g)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("files", "crds", filepath.Base(g)))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "charts/kfn/files/crds/%s differs from api/crds: run make generate", filepath.Base(g))

		var crd map[string]any
		require.NoError(t, yaml.Unmarshal(want, &crd))
		name := crd["metadata"].(map[string]any)["name"].(string)
		r := rendered[name]
		require.NotNil(t, r, "CRD %s rendered", name)
		assert.Equal(t, "keep", r.GetAnnotations()["helm.sh/resource-policy"], "%s: helm uninstall keeps it", name)
		assert.Equal(t, "Helm", r.GetLabels()["app.kubernetes.io/managed-by"], name)
		assert.Equal(t, releaseName, r.GetLabels()["app.kubernetes.io/instance"], name)
		got2 := r.DeepCopy().Object
		meta := got2["metadata"].(map[string]any)
		delete(meta, "labels")
		delete(meta["annotations"].(map[string]any), "helm.sh/resource-policy")
		require.Equal(t, normalized(t, crd), normalized(t, got2), "%s renders as generated", name)
	}

	for _, o := range render(t, map[string]any{"crds": map[string]any{"keep": false}}) {
		if o.GetKind() == "CustomResourceDefinition" {
			assert.NotContains(t, o.GetAnnotations(), "helm.sh/resource-policy", "crds.keep false: uninstall deletes %s", o.GetName())
		}
	}
	for _, o := range render(t, map[string]any{"crds": map[string]any{"install": false}}) {
		assert.NotEqual(t, "CustomResourceDefinition", o.GetKind(), "crds.install false renders no CRD (%s)", o.GetName())
	}
}

// normalized is v through JSON, so that numbers compare alike whichever
// decoder read them.
func normalized(t *testing.T, v any) any {
	t.Helper()
	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, yaml.Unmarshal(b, &out))
	return out
}

// crdRelease is the release of TestCRDsUpgradedByTheChart: not the other
// tests' (their cluster-wide objects are applied without Helm's ownership).
const crdRelease = "kfncrds"

// crdRuns numbers the namespaces of TestCRDsUpgradedByTheChart (go test
// -count=N reuses the API server).
var crdRuns int

// unconfined is a Function whose pod annotation asks for an unconfined
// AppArmor profile, which the chart's Function CRD refuses and the one of
// oldChart admitted.
func unconfined(namespace string) *v1alpha2.Function {
	f := inlineFunction("unconfined", 1, 1)
	f.Namespace = namespace
	f.Spec.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/function": "unconfined"}
	return f
}

// TestCRDsUpgradedByTheChart installs, with the Helm SDK on the test API
// server, a release of an earlier chart that kept its CRDs in crds/ (Helm
// creates those once, unowned by the release) and whose Function CRD lacks
// the rules against unconfined AppArmor annotations, as before 0.2.0;
// then upgrades it to this chart. A plain upgrade is refused (the CRDs
// exist and are not the release's), and so is one with --take-ownership
// alone (they were last written by another field manager, as kubectl apply
// --server-side leaves them); with --take-ownership --force-conflicts
// (README, "Upgrade") it adopts them and the API server serves the new schema: the
// Function the old CRD admitted is refused. helm uninstall leaves the CRDs
// and the Function.
func TestCRDsUpgradedByTheChart(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crdRuns++
	ns := fmt.Sprintf("kfn-crds-%d", crdRuns)
	appNS := fmt.Sprintf("kfn-crds-apps-%d", crdRuns)
	for _, n := range []string{ns, appNS} {
		require.NoError(t, client.IgnoreAlreadyExists(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})))
	}
	cfg := helmConfig(t, c, ns)
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha2.AddToScheme(scheme))
	fns, err := client.New(c.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	// The cluster as the old chart's first install left it: its CRDs, not
	// the release's. Other tests of the package apply the CRDs (and leave
	// Subscriptions whose finalizer nothing removes any more), so they are
	// put back to the old ones in place rather than deleted; Helm then
	// skips the old chart's crds/, as it does for CRDs that exist.
	old := oldChart(t)
	for _, f := range old.CRDObjects() {
		want := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(f.File.Data, want))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(want), crd)
		if apierrors.IsNotFound(err) {
			require.NoError(t, c.Client.Create(ctx, want))
			continue
		}
		require.NoError(t, err)
		crd.Spec, crd.Labels, crd.Annotations = want.Spec, want.Labels, want.Annotations
		require.NoError(t, c.Client.Update(ctx, crd), "CRD %s as the old chart made it", crd.Name)
	}

	install := action.NewInstall(cfg)
	install.ReleaseName = crdRelease
	install.Namespace = ns
	install.KubeVersion = kubeVersion(t)
	install.ServerSideApply = true
	install.WaitStrategy = kube.HookOnlyStrategy
	install.Timeout = time.Minute
	_, err = install.RunWithContext(ctx, old, nil)
	require.NoError(t, err, "install the old chart")
	served(t, ctx, c)
	// A CRD's new schema is served a moment after the API server stores it.
	require.Eventually(t, func() bool { return fns.Create(ctx, unconfined(appNS), client.DryRunAll) == nil },
		time.Minute, 100*time.Millisecond, "the old CRD admits an unconfined AppArmor annotation")
	kept := inlineFunction("kept", 1, 1)
	kept.Namespace = appNS
	require.NoError(t, fns.Create(ctx, kept))

	upgrade := func(takeOwnership, forceConflicts bool) error {
		u := action.NewUpgrade(cfg)
		u.Namespace = ns
		u.ResetThenReuseValues = true
		u.TakeOwnership = takeOwnership
		u.ForceConflicts = forceConflicts
		u.WaitStrategy = kube.HookOnlyStrategy
		u.Timeout = time.Minute
		_, err := u.RunWithContext(ctx, crdRelease, loadChart(t), nil)
		return err
	}
	err = upgrade(false, false)
	require.Error(t, err, "the CRDs are not the release's: a plain upgrade must not take them")
	assert.Contains(t, err.Error(), "invalid ownership metadata")
	// The CRDs were last written by another field manager than Helm (here
	// the test's client; for a user, kubectl apply --server-side as the
	// README of 0.1.0 said): Helm 4's server-side apply conflicts with it.
	err = upgrade(true, false)
	require.Error(t, err, "helm upgrade --take-ownership without --force-conflicts")
	assert.Contains(t, err.Error(), "conflict")
	require.NoError(t, upgrade(true, true), "helm upgrade --take-ownership --force-conflicts")

	require.Eventually(t, func() bool {
		err := fns.Create(ctx, unconfined(appNS), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "an AppArmor annotation must not be unconfined")
	}, time.Minute, 100*time.Millisecond, "the upgraded CRD refuses an unconfined AppArmor annotation")
	for _, f := range old.CRDObjects() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: crdName(t, f.File.Data)}, crd))
		assert.Equal(t, crdRelease, crd.Annotations["meta.helm.sh/release-name"], "%s is the release's", crd.Name)
		assert.Equal(t, "keep", crd.Annotations["helm.sh/resource-policy"], crd.Name)
	}

	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	_, err = uninstall.Run(crdRelease)
	require.NoError(t, err)
	for _, f := range old.CRDObjects() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: crdName(t, f.File.Data)}, crd), "helm uninstall keeps the CRD")
		assert.Nil(t, crd.DeletionTimestamp, "%s is not being deleted", crd.Name)
	}
	require.NoError(t, fns.Get(ctx, client.ObjectKeyFromObject(kept), kept), "the Function outlives helm uninstall")
	require.NoError(t, fns.Delete(ctx, kept))
}

// helmConfig is a Helm action configuration for namespace of the test API
// server, with its releases in Secrets, as helm's own.
func helmConfig(t *testing.T, c *testcluster.Cluster, namespace string) *action.Configuration {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, c.KubeConfig, 0o600))
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, cfg.Init(flags, namespace, "secret"))
	return cfg
}

// oldChart is this chart as it was before 0.2.0 as far as the CRDs go:
// version 0.1.0, the CRDs in crds/ (installed once by Helm, not owned by
// the release) instead of templates/crds.yaml, and a Function CRD without
// the rules on the pod annotations that came after it (unconfined
// AppArmor and seccomp).
func oldChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch := loadChart(t)
	ch.Metadata.Version = "0.1.0"
	var templates []*common.File
	for _, f := range ch.Templates {
		if f.Name != "templates/crds.yaml" {
			templates = append(templates, f)
		}
	}
	require.Len(t, templates, len(ch.Templates)-1, "the chart has templates/crds.yaml")
	ch.Templates = templates
	var files []*common.File
	for _, f := range ch.Files {
		if !strings.HasPrefix(f.Name, "files/crds/") {
			files = append(files, f)
			continue
		}
		if strings.Contains(f.Name, "apirules") {
			continue // the earlier chart had no APIRule CRD: the upgrade creates it
		}
		data := f.Data
		if strings.Contains(f.Name, "functions") {
			data = withoutAppArmorRule(t, data)
		}
		files = append(files, &common.File{Name: "crds/" + filepath.Base(f.Name), Data: data})
	}
	ch.Files = files
	require.Len(t, ch.CRDObjects(), 2)
	return ch
}

// withoutAppArmorRule is the Function CRD with the first two rules only on
// spec.annotations, as before the AppArmor and seccomp ones.
func withoutAppArmorRule(t *testing.T, data []byte) []byte {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	ann := spec.Properties["annotations"]
	require.Greater(t, len(ann.XValidations), 2)
	for _, r := range ann.XValidations[2:] {
		require.Contains(t, r.Message, "must not be unconfined")
	}
	ann.XValidations = ann.XValidations[:2]
	spec.Properties["annotations"] = ann
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	out, err := yaml.Marshal(crd)
	require.NoError(t, err)
	return out
}

func crdName(t *testing.T, data []byte) string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	return crd.Name
}

// served waits until both CRDs are established.
func served(t *testing.T, ctx context.Context, c *testcluster.Cluster) {
	t.Helper()
	for _, name := range []string{"functions.serverless.kyma-project.io", "subscriptions.eventing.kyma-project.io"} {
		require.Eventually(t, func() bool {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if c.Client.Get(ctx, client.ObjectKey{Name: name}, crd) != nil {
				return false
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}, time.Minute, 100*time.Millisecond, "CRD %s established", name)
	}
}
