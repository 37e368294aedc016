package function_test

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/test/fntest"
)

// installKEDA installs KEDA's CRDs from the keda module in the Go module
// cache, as a KEDA installation would.
func installKEDA(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2").Output()
	require.NoError(t, err, "find the keda module")
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	crds, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	require.NoError(t, err)
	require.NotEmpty(t, crds)
}

// TestKEDA runs in one test, in order, because KEDA is installed into the
// package's cluster half way: a Function that scales to zero waits for
// KEDA, then gets its ScaledObject once KEDA appears.
func TestKEDA(t *testing.T) {
	ns := namespace(t)
	zero := create(t, fntest.Function("zero", ns, fntest.Scale(0, 5), fntest.ScaleTargets(3, 2, 30)))
	zkey := client.ObjectKeyFromObject(zero)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := cluster.Client.Get(testCtx(t), client.ObjectKey{Name: "scaledobjects.keda.sh"}, crd); apierrors.IsNotFound(err) {
		got := condition(t, zkey, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)
		assert.Contains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "needs KEDA")
		installKEDA(t)
	} // else: an earlier run of this test (go test -count) installed KEDA

	condition(t, zkey, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	so := &kedav1alpha1.ScaledObject{}
	eventually(t, func() error { return cluster.Client.Get(testCtx(t), zkey, so) })
	assert.Equal(t, "zero", so.Spec.ScaleTargetRef.Name)
	assert.Equal(t, int32(0), *so.Spec.MinReplicaCount)
	assert.Equal(t, int32(5), *so.Spec.MaxReplicaCount)
	assert.Equal(t, int32(30), *so.Spec.CooldownPeriod)
	require.Len(t, so.Spec.Triggers, 1)
	assert.Equal(t, "external-push", so.Spec.Triggers[0].Type)
	assert.Equal(t, map[string]string{
		trigger.KeyScalerAddress: "scaler.test:9090", trigger.KeyFunctionNamespace: ns,
		trigger.KeyFunctionName: "zero", trigger.KeyTargetBacklog: "3", trigger.KeyTargetConcurrency: "2",
	}, so.Spec.Triggers[0].Metadata)
	assert.Equal(t, zero.UID, metav1.GetControllerOf(so).UID)
	d := deploymentOf(t, zkey)
	assert.False(t, hasReplicasField(d), "KEDA owns the replicas")

	// KEDA scales to zero: Running is True with ScaledToZero.
	d.Spec.Replicas = new(int32)
	require.NoError(t, cluster.Client.Update(testCtx(t), d))
	markReady(t, zkey)
	condition(t, zkey, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonScaledToZero)

	// A CPU-range Function gets an HPA until a Subscription points at it.
	busy := create(t, fntest.Function("busy", ns, fntest.Scale(1, 3)))
	bkey := client.ObjectKeyFromObject(busy)
	eventually(t, func() error { return cluster.Client.Get(testCtx(t), bkey, &autoscalingv2.HorizontalPodAutoscaler{}) })
	sub := &eventingv1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: ns},
		Spec: eventingv1alpha2.SubscriptionSpec{
			Sink: fmt.Sprintf("http://busy.%s.svc.cluster.local", ns), Source: "shop", Types: []string{"order.created.v1"},
		},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), sub))
	eventually(t, func() error {
		if err := cluster.Client.Get(testCtx(t), bkey, &kedav1alpha1.ScaledObject{}); err != nil {
			return err
		}
		if err := cluster.Client.Get(testCtx(t), bkey, &autoscalingv2.HorizontalPodAutoscaler{}); !apierrors.IsNotFound(err) {
			return errors.New("HPA still there")
		}
		return nil
	})

	// Without the Subscription it is back on CPU.
	require.NoError(t, cluster.Client.Delete(testCtx(t), sub))
	eventually(t, func() error {
		if err := cluster.Client.Get(testCtx(t), bkey, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
			return err
		}
		if err := cluster.Client.Get(testCtx(t), bkey, &kedav1alpha1.ScaledObject{}); !apierrors.IsNotFound(err) {
			return errors.New("ScaledObject still there")
		}
		return nil
	})

	// Deleting the Function deletes its ScaledObject.
	require.NoError(t, cluster.Client.Delete(testCtx(t), zero))
	waitGone(t, testCtx(t), zkey, &kedav1alpha1.ScaledObject{})

	userScaledObject(t, ns)
}

// userScaledObject follows Kyma's "Use External Scalers" tutorial with
// KEDA: a ScaledObject named after the Function, whose target is the
// Function, scales it through spec.replicas, down to zero too. kfn leaves
// it as the user made it and, while it exists, makes no ScaledObject of
// its own even for a Function whose scaleConfig asks to scale to zero.
func userScaledObject(t *testing.T, ns string) {
	so := &kedav1alpha1.ScaledObject{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled-function", Namespace: ns},
		Spec: kedav1alpha1.ScaledObjectSpec{
			ScaleTargetRef:  &kedav1alpha1.ScaleTarget{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: "scaled-function"},
			MinReplicaCount: ptr.To[int32](0),
			MaxReplicaCount: ptr.To[int32](5),
			Triggers:        []kedav1alpha1.ScaleTriggers{{Type: "cpu", MetricType: autoscalingv2.UtilizationMetricType, Metadata: map[string]string{"value": "50"}}},
		},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), so))
	key := applyManifest(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: scaled-function
spec:
  runtime: nodejs24
  replicas: 1
  scaleConfig:
    minReplicas: 0
    maxReplicas: 3
  source:
    inline:
      source: |
        module.exports = { main: function (event, context) { return 'Hello World!' } }
`)
	// The controller's cache may see the Function before the ScaledObject
	// made a moment earlier; the ScaledObject's watch event brings the note.
	configured(t, key, "ScaledObject scaled-function scales the Function through spec.replicas; spec.scaleConfig is ignored while it does")
	deploymentReplicas(t, key, 1)
	mine := &kedav1alpha1.ScaledObject{}
	require.True(t, get(t, key, mine))
	assert.Nil(t, metav1.GetControllerOf(mine), "the user's ScaledObject is not taken over")
	assert.Equal(t, "cpu", mine.Spec.Triggers[0].Type)

	// KEDA scales the Function to zero through the scale subresource.
	scaleFunction(t, key, 0)
	deploymentReplicas(t, key, 0)
	markReady(t, key)
	condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
}

// hasReplicasField reports whether the controller's field manager owns
// spec.replicas of the Deployment.
func hasReplicasField(d *appsv1.Deployment) bool {
	for _, mf := range d.ManagedFields {
		if mf.Manager == function.DefaultFieldManager && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:replicas"`) {
			return true
		}
	}
	return false
}
