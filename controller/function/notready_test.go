package function_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// notReadyCases is the number of manifests in api/testdata/not-ready
// (package api and api/manifest count them too).
const notReadyCases = 17

// TestNotReadyManifests applies each Function that Kyma accepts at
// admission and only reports as not ready, as a Kyma user wrote it, and
// waits for what Kyma shows: ConfigurationReady False with reason
// InvalidFunctionSpec and the problems, in Kyma's words, joined by ". ".
// Nothing is made for such a Function.
func TestNotReadyManifests(t *testing.T) {
	dir := filepath.Join("..", "..", "api", "testdata", "not-ready")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, notReadyCases)
	ns := namespace(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			var want []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					want = append(want, w)
				}
			}
			require.NotEmpty(t, want)
			docs, err := manifest.Decode(f, data)
			require.NoError(t, err)
			require.Len(t, docs, 1)
			obj := docs[0].Object
			obj.SetNamespace(ns)
			require.NoError(t, cluster.Client.Create(testCtx(t), obj))

			key := client.ObjectKeyFromObject(obj)
			fn := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)
			assert.Equal(t, strings.Join(want, ". "), fn.Status.Condition(v1alpha2.ConditionConfigurationReady).Message)
			build := fn.Status.Condition(v1alpha2.ConditionBuildReady)
			require.NotNil(t, build)
			assert.Equal(t, metav1.ConditionFalse, build.Status, "the deprecated BuildReady says the same")
			assert.False(t, get(t, key, &appsv1.Deployment{}), "no Deployment for a Function that cannot run")
			assert.False(t, get(t, key, &corev1.ConfigMap{}))
		})
	}
}

// TestNotReadyFunctionRunsOnceFixed checks the way out: fixing the spec
// makes the same Function configured and its Deployment made.
func TestNotReadyFunctionRunsOnceFixed(t *testing.T) {
	ns := namespace(t)
	const doc = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: too-small
spec:
  runtime: python312
  resourceConfiguration:
    function:
      resources:
        requests:
          cpu: 5m
          memory: 64Mi
  source:
    inline:
      source: |
        def main(event, context):
            return "hi"
`
	docs, err := manifest.Decode("too-small.yaml", []byte(doc))
	require.NoError(t, err)
	obj := docs[0].Object
	obj.SetNamespace(ns)
	require.NoError(t, cluster.Client.Create(testCtx(t), obj))
	key := client.ObjectKeyFromObject(obj)
	fn := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)
	assert.Equal(t, "Function request cpu(5m) should be higher than minimal value (10m)", fn.Status.Condition(v1alpha2.ConditionConfigurationReady).Message)

	update(t, key, func(f *v1alpha2.Function) {
		f.Spec.ResourceConfiguration.Function.Resources.Requests[corev1.ResourceCPU] = v1alpha2.MinRequestCPU
	})
	condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	deploymentOf(t, key)
}

// TestDuplicateEnvRunsAsInKyma applies a Function that defines a variable
// twice, which Kyma accepts and runs: the Deployment has the variable once,
// with its last value (server-side apply refuses two entries of one name),
// and ConfigurationReady says which definition is used.
func TestDuplicateEnvRunsAsInKyma(t *testing.T) {
	ns := namespace(t)
	path := filepath.Join("..", "..", "api", "testdata", "valid", "env-duplicate.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	docs, err := manifest.Decode(path, data)
	require.NoError(t, err)
	obj := docs[0].Object
	obj.SetNamespace(ns)
	require.NoError(t, cluster.Client.Create(testCtx(t), obj))
	key := client.ObjectKeyFromObject(obj)

	fn := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	assert.Contains(t, fn.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "spec.env defines GREETING more than once: the last definition is used")
	c := functionContainer(deploymentOf(t, key))
	var values []string
	for _, e := range c.Env {
		if e.Name == "GREETING" {
			values = append(values, e.Value)
		}
	}
	assert.Equal(t, []string{"hi"}, values)
}
