package resources_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// planConfig names the images of the runtimes these tests use, as the
// controller's defaults do.
var planConfig = plan.Config{
	Images: map[string]string{
		"nodejs22":  "kfn/runtime-nodejs22:latest",
		"python312": "kfn/runtime-python312:latest",
	},
	PublisherAddress: "http://kfn-publisher.kfn-system.svc.cluster.local/publish",
}

func testConfig() resources.Config {
	c := resources.DefaultConfig()
	c.ScalerAddress = "scaler.test:9090"
	return c
}

// typed converts an apply configuration into the API type it describes.
func typed[T any](t *testing.T, ac any) *T {
	t.Helper()
	b, err := json.Marshal(ac)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(b, &out))
	return &out
}

// planFor plans fn and chooses its autoscaler as in a cluster with KEDA
// and no Subscription to fn: KEDA to scale to zero, an HPA for a CPU range,
// else none (the Deployment's replicas are set).
func planFor(t *testing.T, fn *v1alpha2.Function) plan.Plan {
	t.Helper()
	p, err := plan.For(fn, planConfig)
	require.NoError(t, err)
	require.NoError(t, p.SetAutoscaler(true, false))
	return p
}

func deployment(t *testing.T, fn *v1alpha2.Function) *appsv1.Deployment {
	t.Helper()
	return typed[appsv1.Deployment](t, resources.Deployment(planFor(t, fn), testConfig()))
}

func container(pod corev1.PodSpec, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func mount(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}
