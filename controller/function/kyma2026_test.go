package function_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// fromYAML reads a Function manifest, as a user applies it, into ns.
func fromYAML(t *testing.T, ns, manifest string) *v1alpha2.Function {
	t.Helper()
	fn := &v1alpha2.Function{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(manifest), fn))
	fn.Namespace = ns
	return fn
}

// TestKymaManifestsOf2026 applies Function manifests as Kyma's
// documentation of 2026 (serverless 1.10-1.13) writes them: a resource
// preset chosen by the label its "Available Presets" page names, and
// Functions on the runtimes its deprecation schedule deprecates, which
// run and say so in ConfigurationReady.
func TestKymaManifestsOf2026(t *testing.T) {
	ns := namespace(t)

	t.Run("the function-resources-preset label", func(t *testing.T) {
		fn := create(t, fromYAML(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: preset-s
  labels:
    serverless.kyma-project.io/function-resources-preset: S
spec:
  runtime: nodejs24
  source:
    inline:
      source: |
        module.exports = { main: function (event, context) { return 'Hello Serverless' } }
`))
		key := client.ObjectKeyFromObject(fn)
		configured(t, key)
		got := &v1alpha2.Function{}
		require.True(t, get(t, key, got))
		assert.Equal(t, "S", got.Status.FunctionResourceProfile)
		c := functionContainer(deploymentOf(t, key))
		for name, want := range map[string]resource.Quantity{
			"requests cpu": resource.MustParse("100m"), "requests memory": resource.MustParse("128Mi"),
			"limits cpu": resource.MustParse("200m"), "limits memory": resource.MustParse("256Mi"),
		} {
			list := c.Resources.Requests
			if strings.HasPrefix(name, "limits") {
				list = c.Resources.Limits
			}
			q := list[corev1.ResourceName(strings.Fields(name)[1])]
			assert.Equal(t, 0, q.Cmp(want), "%s: %s, want %s", name, q.String(), want.String())
		}

		bad := create(t, fromYAML(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: preset-unknown
  labels:
    serverless.kyma-project.io/function-resources-preset: XXL
spec:
  runtime: nodejs24
  source:
    inline:
      source: |
        module.exports = { main: function (event, context) { return 'Hello Serverless' } }
`))
		configured(t, client.ObjectKeyFromObject(bad), `"XXL" names no preset`)
		require.True(t, get(t, client.ObjectKeyFromObject(bad), got))
		assert.Equal(t, v1alpha2.DefaultProfile, got.Status.FunctionResourceProfile, "runs with the default preset, as Kyma's controller does")
	})

	for _, rt := range []string{"nodejs20", "nodejs22", "python312"} {
		t.Run("deprecated "+rt, func(t *testing.T) {
			source := "module.exports = { main: function (event, context) { return 'Hello World!' } }"
			if strings.HasPrefix(rt, "python") {
				source = "def main(event, context):\n          return 'Hello World!'"
			}
			fn := create(t, fromYAML(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: old-`+rt+`
spec:
  runtime: `+rt+`
  source:
    inline:
      source: |
        `+source+`
`))
			key := client.ObjectKeyFromObject(fn)
			got := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
			msg := got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message
			assert.True(t, strings.HasPrefix(msg, "Warning: function configured, runtime "+rt+" is deprecated and will be removed in the future"), msg)
			assert.Contains(t, msg, "end of life: "+v1alpha2.Runtime(rt).EndOfLife())
			assert.NotNil(t, deploymentOf(t, key), "a deprecated runtime still runs")
		})
	}

	t.Run("a current runtime has no warning", func(t *testing.T) {
		fn := create(t, fromYAML(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: current
spec:
  runtime: nodejs24
  source:
    inline:
      source: "module.exports = { main: () => 'hi' }"
`))
		got := condition(t, client.ObjectKeyFromObject(fn), v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
		assert.NotContains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "Warning")
	})
}
