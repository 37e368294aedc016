// Tests of kfn's CRDs on a real kube-apiserver: what it accepts, defaults,
// refuses (with which message), and the status and scale subresources.
package api_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/test/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Into(&cluster),
		testcluster.WithScheme(serverlessv1alpha2.AddToScheme, eventingv1alpha2.AddToScheme, apiextensionsv1.AddToScheme)))
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	require.NoError(t, cluster.Client.Create(context.Background(), ns))
	return ns.Name
}

// readManifest decodes the single object of a testdata manifest into ns.
func readManifest(t *testing.T, path, ns string) (*unstructured.Unstructured, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	docs, err := manifest.Decode(path, data)
	require.NoError(t, err)
	require.Len(t, docs, 1)
	obj := docs[0].Object
	obj.SetNamespace(ns)
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if w, ok := strings.CutPrefix(line, "# want: "); ok {
			want = append(want, w)
		}
	}
	return obj, want
}

func TestAPIServerAcceptsValidManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/valid/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	ns := namespace(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			obj, _ := readManifest(t, f, ns)
			require.NoError(t, cluster.Client.Create(context.Background(), obj))
		})
	}
}

// TestAPIServerAcceptsNotReadyManifests checks that the API server stores
// the Functions Kyma accepts at admission and only reports as not ready
// (the controller's tests await that condition), and that the offline
// admission of kfn dev accepts them too.
func TestAPIServerAcceptsNotReadyManifests(t *testing.T) {
	admitter, err := manifest.NewAdmitter()
	require.NoError(t, err)
	entries, err := os.ReadDir("testdata/not-ready")
	require.NoError(t, err)
	require.Equal(t, notReadyCases, len(entries), "files in testdata/not-ready")
	files, err := filepath.Glob("testdata/not-ready/*.yaml")
	require.NoError(t, err)
	require.Equal(t, notReadyCases, len(files), "every file in testdata/not-ready is a .yaml case")
	ns := namespace(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			obj, want := readManifest(t, f, ns)
			require.NotEmpty(t, want)
			require.Empty(t, admitter.Admit(context.Background(), obj.DeepCopy()), "kfn dev admits it")
			require.NoError(t, cluster.Client.Create(context.Background(), obj), "the API server accepts it, as Kyma's does")
		})
	}
}

// invalidCases is the number of manifests in testdata/invalid. The tests
// that read them check that they read every one, so a lost case or a
// narrowed pattern fails instead of quietly testing less; a new case
// raises it (and api/manifest's own count).
const invalidCases = 77

// notReadyCases is the number of manifests in testdata/not-ready: Functions
// Kyma accepts and reports as not ready (api/manifest's count too).
const notReadyCases = 17

// invalidManifests returns the paths of every case in testdata/invalid.
func invalidManifests(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("testdata/invalid")
	require.NoError(t, err)
	require.Equal(t, invalidCases, len(entries), "files in testdata/invalid")
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	require.NoError(t, err)
	require.Equal(t, invalidCases, len(files), "every file in testdata/invalid is a .yaml case")
	return files
}

func TestAPIServerRefusesInvalidManifests(t *testing.T) {
	files := invalidManifests(t)
	ns := namespace(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			obj, want := readManifest(t, f, ns)
			require.NotEmpty(t, want)
			err := cluster.Client.Create(context.Background(), obj.DeepCopy())
			require.Error(t, err, "the API server must refuse this manifest")
			require.True(t, apierrors.IsInvalid(err), "refused as invalid (422), got %v", err)
			for _, w := range want {
				assert.Contains(t, err.Error(), w)
			}
			if obj.GetName() != "" && !strings.Contains(obj.GetName(), "_") {
				got := obj.DeepCopy()
				err = cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got)
				assert.True(t, apierrors.IsNotFound(err), "a refused object is not stored")
			}
		})
	}
}

// TestOfflineAdmissionAgreesWithAPIServer checks that api/manifest, which
// `kfn dev` uses instead of an API server, refuses every invalid manifest
// with the very message the API server gives.
func TestOfflineAdmissionAgreesWithAPIServer(t *testing.T) {
	admitter, err := manifest.NewAdmitter()
	require.NoError(t, err)
	files := invalidManifests(t)
	ns := namespace(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			obj, _ := readManifest(t, f, ns)
			serverErr := cluster.Client.Create(context.Background(), obj.DeepCopy())
			require.Error(t, serverErr)
			offline := admitter.Admit(context.Background(), obj.DeepCopy())
			require.NotEmpty(t, offline)
			for _, e := range offline {
				assert.Contains(t, serverErr.Error(), e.Error(), "the API server reports the same error")
			}
		})
	}
}

func TestFunctionDefaultsAndSubresources(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	fn := &serverlessv1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: serverlessv1alpha2.FunctionSpec{
			Runtime: serverlessv1alpha2.NodeJS22,
			Source:  serverlessv1alpha2.Source{Inline: &serverlessv1alpha2.InlineSource{Source: "module.exports = { main: () => 'hi' }"}},
		},
	}
	require.NoError(t, cluster.Client.Create(ctx, fn))
	assert.Equal(t, ptr.To[int32](1), fn.Spec.Replicas, "spec.replicas defaults to 1")

	// Status goes through the status subresource only.
	fn.Status.Replicas = 1
	fn.Status.PodSelector = "serverless.kyma-project.io/function-name=hello"
	fn.Status.SetCondition(serverlessv1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, serverlessv1alpha2.ReasonFunctionSpecValidated, "ok", fn.Generation)
	require.NoError(t, cluster.Client.Status().Update(ctx, fn))
	got := &serverlessv1alpha2.Function{}
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(fn), got))
	assert.True(t, ptr.To(*got.Status.Condition(serverlessv1alpha2.ConditionConfigurationReady)).Status == metav1.ConditionTrue)

	// kubectl scale fn hello --replicas=3 goes through the scale subresource.
	scale := &autoscalingv1.Scale{}
	require.NoError(t, cluster.Client.SubResource("scale").Get(ctx, got, scale))
	assert.Equal(t, int32(1), scale.Spec.Replicas)
	assert.Equal(t, "serverless.kyma-project.io/function-name=hello", scale.Status.Selector)
	scale.Spec.Replicas = 3
	require.NoError(t, cluster.Client.SubResource("scale").Update(ctx, got, client.WithSubResourceBody(scale)))
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(fn), got))
	assert.Equal(t, ptr.To[int32](3), got.Spec.Replicas)
}

func TestSubscriptionDefaults(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sub := &eventingv1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: ns},
		Spec: eventingv1alpha2.SubscriptionSpec{
			Sink:   "http://orders." + ns + ".svc.cluster.local",
			Source: "shop",
			Types:  []string{"order.created.v1"},
		},
	}
	require.NoError(t, cluster.Client.Create(ctx, sub))
	assert.Equal(t, eventingv1alpha2.TypeMatchingStandard, sub.Spec.TypeMatching)
	assert.Equal(t, map[string]eventingv1alpha2.ConfigValue{"maxInFlightMessages": "10"}, sub.Spec.Config)

	sub.Status.Types = sub.CleanTypes()
	sub.Status.SetCondition(eventingv1alpha2.ConditionSubscriptionActive, corev1.ConditionFalse, eventingv1alpha2.ReasonNATSSubscriptionNotActive, "waiting", metav1.Now())
	require.NoError(t, cluster.Client.Status().Update(ctx, sub))
	got := &eventingv1alpha2.Subscription{}
	require.NoError(t, cluster.Client.Get(ctx, client.ObjectKeyFromObject(sub), got))
	assert.False(t, got.Status.Ready)
	assert.Equal(t, "Subscription active", string(got.Status.Conditions[0].Type), "Kyma's condition type, spaces and all")
}

func TestPrinterColumnsAndNames(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		columns    []string
		shortNames []string
	}{
		"functions.serverless.kyma-project.io":   {columns: []string{"Configured", "Running", "Runtime", "Version", "Age"}, shortNames: []string{"fn", "fns"}},
		"subscriptions.eventing.kyma-project.io": {columns: []string{"Ready", "Age"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Name: name}, crd))
			var columns []string
			for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
				columns = append(columns, c.Name)
			}
			assert.Equal(t, tt.columns, columns)
			assert.Equal(t, tt.shortNames, crd.Spec.Names.ShortNames)
		})
	}
}
