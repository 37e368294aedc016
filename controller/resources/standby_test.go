package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/fntest"
)

// TestStandbyPodHasAWritableDependenciesVolume: a standby pod has no
// source and no init container, even when made from a Function with
// dependencies, and has a writable dependencies volume, bounded as a
// Function pod's, where its host unpacks a Function's dependencies from
// the cache; the identity token is mounted (the host fetches with it).
// Fails when the volume is missing, read-only or unbounded, or an install
// container appears.
func TestStandbyPodHasAWritableDependenciesVolume(t *testing.T) {
	cfg := testConfig()
	for name, fn := range map[string]*v1alpha2.Function{
		"without dependencies": fntest.Function("f", "ns"),
		"with dependencies":    fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, fntest.PackageJSON)),
	} {
		t.Run(name, func(t *testing.T) {
			pod := typed[corev1.Pod](t, resources.StandbyPod(planFor(t, fn), cfg, "kfn-pool-x", nil, nil)).Spec
			assert.Empty(t, pod.InitContainers)
			c := container(pod, resources.ContainerFunction)
			require.NotNil(t, c)
			assert.Nil(t, mount(c, runtimes.PodSourceDir), "a standby host is given its source")
			deps := mount(c, runtimes.PodDepsDir)
			require.NotNil(t, deps)
			assert.False(t, deps.ReadOnly, "the host unpacks dependencies there")
			v := volume(pod, deps.Name)
			require.NotNil(t, v.EmptyDir)
			assert.Equal(t, cfg.Volumes.Dependencies.String(), v.EmptyDir.SizeLimit.String())
			assert.Nil(t, mount(c, resources.RegistryConfigDir), "no registry credentials")
			assert.NotNil(t, mount(c, runtimes.PodIdentityDir))
		})
	}
}
