package function_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
)

// TestRuntimeImageOverrideFromAnotherRegistry checks that a Function
// whose runtimeImageOverride is not from a registry the controller allows
// (its default: its runtime images', docker.io/kfn) is not configured and
// runs nothing, with Kyma's reason and a message that says what to do, and
// runs once it names an allowed image.
func TestRuntimeImageOverrideFromAnotherRegistry(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("miner", ns, fntest.ImageOverride("evil.example/miner:1")))
	key := client.ObjectKeyFromObject(fn)
	got := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)
	assert.Contains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message,
		"spec.runtimeImageOverride: image not allowed: evil.example/miner:1 is not from a registry this installation allows (docker.io/kfn)")
	assert.False(t, get(t, key, &appsv1.Deployment{}), "nothing runs with an image from elsewhere")

	update(t, key, func(f *v1alpha2.Function) { f.Spec.RuntimeImageOverride = "kfn/runtime-nodejs22:custom" })
	condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	eventually(t, func() error {
		d, err := deployment(key)
		if err == nil && functionContainer(d).Image != "kfn/runtime-nodejs22:custom" {
			err = fmt.Errorf("image %s", functionContainer(d).Image)
		}
		return err
	})
}

// TestServiceAccountTokenAsTheFunctionAsks checks the Deployments the API
// server stores: no token for a Function that does not ask; for one that
// asks (the annotation), the projected token in the function container
// only; and none again once the annotation is removed.
func TestServiceAccountTokenAsTheFunctionAsks(t *testing.T) {
	ns := namespace(t)
	mounted := func(d *appsv1.Deployment) (function, init bool) {
		pod := d.Spec.Template.Spec
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			return true, true // automounted everywhere
		}
		for _, c := range pod.InitContainers {
			for _, m := range c.VolumeMounts {
				init = init || m.MountPath == resources.ServiceAccountDir
			}
		}
		for _, m := range functionContainer(d).VolumeMounts {
			function = function || m.MountPath == resources.ServiceAccountDir
		}
		return function, init
	}
	waitMounted := func(key client.ObjectKey, want bool) {
		t.Helper()
		eventually(t, func() error {
			d, err := deployment(key)
			if err != nil {
				return err
			}
			if fnTok, initTok := mounted(d); fnTok != want || initTok {
				return fmt.Errorf("token in the function container %v, in an init container %v", fnTok, initTok)
			}
			return nil
		})
	}

	plain := create(t, fntest.Function("plain", ns, fntest.Source(fntest.HelloJS, fntest.PackageJSON)))
	waitMounted(client.ObjectKeyFromObject(plain), false)

	asks := create(t, fntest.Function("asks", ns, fntest.Source(fntest.HelloJS, fntest.PackageJSON),
		fntest.Annotate(v1alpha2.AnnotationServiceAccountToken, "true")))
	key := client.ObjectKeyFromObject(asks)
	waitMounted(key, true)
	d, err := deployment(key)
	require.NoError(t, err)
	require.Len(t, d.Spec.Template.Spec.InitContainers, 1, "the dependency install, without a token")

	update(t, key, func(f *v1alpha2.Function) { delete(f.Annotations, v1alpha2.AnnotationServiceAccountToken) })
	waitMounted(key, false)
}
