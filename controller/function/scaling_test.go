package function_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// applyManifest creates the one object of a YAML manifest in ns.
func applyManifest(t *testing.T, ns, doc string) types.NamespacedName {
	t.Helper()
	docs, err := manifest.Decode("manifest.yaml", []byte(doc))
	require.NoError(t, err)
	require.Len(t, docs, 1)
	obj := docs[0].Object
	obj.SetNamespace(ns)
	require.NoError(t, cluster.Client.Create(testCtx(t), obj))
	return client.ObjectKeyFromObject(obj)
}

// scaleFunction writes spec.replicas through the scale subresource, as
// the HorizontalPodAutoscaler controller (or KEDA) does for its target.
func scaleFunction(t *testing.T, key types.NamespacedName, n int32) {
	t.Helper()
	fn := &v1alpha2.Function{}
	require.True(t, get(t, key, fn))
	require.NoError(t, cluster.Client.SubResource("scale").Update(testCtx(t), fn,
		client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}})))
}

func deploymentReplicas(t *testing.T, key types.NamespacedName, want int32) {
	t.Helper()
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
			return fmt.Errorf("replicas %v, want %d", d.Spec.Replicas, want)
		}
		return nil
	})
}

// A Kyma manifest with only spec.replicas runs exactly that many pods,
// with no autoscaler of kfn's.
func TestKymaReplicasAreExact(t *testing.T) {
	ns := namespace(t)
	key := applyManifest(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: three
spec:
  runtime: nodejs24
  replicas: 3
  source:
    inline:
      source: |
        module.exports = { main: function (event, context) { return 'Hello World!' } }
`)
	deploymentReplicas(t, key, 3)
	assert.False(t, get(t, key, &autoscalingv2.HorizontalPodAutoscaler{}), "no HPA")
	markReady(t, key)
	fn := condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.Equal(t, int32(3), fn.Status.Replicas)

	// replicas: 0 stops the Function, as in Kyma; it is Running as asked.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Replicas = ptr.To[int32](0) })
	deploymentReplicas(t, key, 0)
	markReady(t, key)
	fn = condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.Contains(t, fn.Status.Condition(v1alpha2.ConditionRunning).Message, "runs 0 replicas, as spec.replicas asks")
}

// TestUserHPAScalesTheFunction follows Kyma's "Use External Scalers"
// tutorial: a Function with replicas: 1 and `kubectl autoscale function
// scaled-function --cpu-percent=50 --min=5 --max=10`, an HPA named after
// the Function whose target is the Function. The HPA sets spec.replicas
// through the scale subresource and the Deployment follows; kfn leaves the
// HPA as the user made it, and while it exists kfn's own scaleConfig
// autoscaler stands aside. Without it, scaleConfig is kfn's again.
func TestUserHPAScalesTheFunction(t *testing.T) {
	ns := namespace(t)
	key := applyManifest(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: scaled-function
spec:
  runtime: nodejs24
  replicas: 1
  source:
    inline:
      dependencies: ""
      source: |
        module.exports = {
          main: function(event, context) {
            return 'Hello World!'
          }
        }
`)
	deploymentReplicas(t, key, 1)

	// What kubectl autoscale function makes.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled-function", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: "scaled-function"},
			MinReplicas:    ptr.To[int32](5),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
			}}},
		},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), hpa))
	configured(t, key, "HorizontalPodAutoscaler scaled-function scales the Function through spec.replicas")

	scaleFunction(t, key, 5) // the HPA's first decision, --min=5
	deploymentReplicas(t, key, 5)

	// A kfn scaleConfig while the user's HPA exists: ignored, said so,
	// and the user's HPA (which has the name kfn's own would take) is left
	// as it was.
	update(t, key, func(f *v1alpha2.Function) {
		f.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)}
	})
	configured(t, key, "HorizontalPodAutoscaler scaled-function scales the Function through spec.replicas", "spec.scaleConfig is ignored while it does")
	deploymentReplicas(t, key, 5)
	got := &autoscalingv2.HorizontalPodAutoscaler{}
	require.True(t, get(t, key, got))
	assert.Nil(t, metav1.GetControllerOf(got), "the user's HPA is not taken over")
	assert.Equal(t, "Function", got.Spec.ScaleTargetRef.Kind)
	assert.Equal(t, int32(10), got.Spec.MaxReplicas)

	// The user's HPA goes: scaleConfig is kfn's again, with its own HPA.
	require.NoError(t, cluster.Client.Delete(testCtx(t), hpa))
	eventually(t, func() error {
		own := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := read(key, own); err != nil {
			return fmt.Errorf("no HPA of kfn's yet: %w", err)
		}
		if ref := metav1.GetControllerOf(own); ref == nil || ref.Kind != "Function" {
			return fmt.Errorf("HPA not kfn's yet: %+v", own.OwnerReferences)
		}
		if own.Spec.ScaleTargetRef.Kind != "Deployment" || own.Spec.MaxReplicas != 3 {
			return fmt.Errorf("HPA %+v", own.Spec)
		}
		return nil
	})
	eventually(t, func() error {
		fn := &v1alpha2.Function{}
		if err := read(key, fn); err != nil {
			return err
		}
		if msg := fn.Status.Condition(v1alpha2.ConditionConfigurationReady).Message; strings.Contains(msg, "HorizontalPodAutoscaler") {
			return fmt.Errorf("still says %q", msg)
		}
		return nil
	})
}

// An HPA of the user's with the Function's name that targets something
// else is not the Function's: kfn needs that name for its own, leaves the
// user's HPA alone and says so in a Warning event on the Function.
func TestForeignHPAWithTheFunctionsName(t *testing.T) {
	ns := namespace(t)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "clash", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "other"},
			MaxReplicas:    2,
		},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), hpa))
	key := applyManifest(t, ns, `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: clash
spec:
  runtime: python312
  scaleConfig:
    minReplicas: 1
    maxReplicas: 4
  source:
    inline:
      source: |
        def main(event, context):
            return "hi"
`)
	deploymentOf(t, key)
	eventually(t, func() error {
		evs := &eventsv1.EventList{}
		if err := cluster.Client.List(testCtx(t), evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "clash" && e.Reason == "AutoscalerFailed" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "exists and is not managed by kfn: delete or rename it") {
				return nil
			}
		}
		return errors.New("no AutoscalerFailed event yet")
	})
	got := &autoscalingv2.HorizontalPodAutoscaler{}
	require.True(t, get(t, key, got))
	assert.Equal(t, "other", got.Spec.ScaleTargetRef.Name, "left as the user made it")
	assert.Nil(t, metav1.GetControllerOf(got))

	require.NoError(t, cluster.Client.Delete(testCtx(t), hpa))
	eventually(t, func() error {
		own := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := cluster.Client.Get(testCtx(t), key, own); err != nil {
			if apierrors.IsNotFound(err) {
				return errors.New("no HPA yet")
			}
			return err
		}
		if own.Spec.ScaleTargetRef.Name != "clash" {
			return fmt.Errorf("target %+v", own.Spec.ScaleTargetRef)
		}
		return nil
	})
}
