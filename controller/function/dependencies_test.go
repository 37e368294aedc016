package function_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/fntest"
)

const testSet = "nodejs22/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// installed is a pod whose install container ended with message.
func installed(message string, code int32) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
		Name:  resources.ContainerInstallDeps,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message}},
	}}}}
}

// hostEnded is a pod whose function container's last run ended with message.
func hostEnded(message string, code int32) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name:                 resources.ContainerFunction,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message}},
	}}}}
}

// deploymentAt is a Deployment of replicas (running pods too), with the
// cached annotation when cached, whose pods fetch the set at start when
// atStart.
func deploymentAt(replicas int32, cached, atStart bool) *appsv1.Deployment {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}, Status: appsv1.DeploymentStatus{Replicas: replicas}}
	if cached {
		d.Annotations = map[string]string{resources.AnnotationDependenciesCached: testSet}
	}
	fn := corev1.Container{Name: resources.ContainerFunction}
	if atStart {
		fn.Env = []corev1.EnvVar{{Name: runtimes.EnvDependencyHash, Value: testSet[len("nodejs22/"):]}}
	} else {
		d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: resources.ContainerInstallDeps}}
	}
	d.Spec.Template.Spec.Containers = []corev1.Container{fn}
	return d
}

// TestDependenciesFromCache: the cache holds a Function's set once an
// install container said so (or the Deployment remembers it), and the
// pods fetch it at start only while the Function is at zero or already
// does; a host that found the set missing sends them back to installing,
// whatever else was said. Another set's messages, another container's,
// a message that is only part of a line or a wrong exit code count for
// nothing. Fails when a running Function's pods are rolled to fetch at
// start, a missing set keeps them fetching, or a forged part-line counts.
func TestDependenciesFromCache(t *testing.T) {
	cachedMsg := runtimes.DependencyCachedMessage + testSet + "\n"
	missingMsg := "kfn: dependencies nodejs22/0123...: asking the cache\n" + runtimes.DependencyMissingMessage + testSet + "\n"
	other := "nodejs22/fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	none, heldOnly, atStart := function.DependencySource{}, function.DependencySource{Cached: true}, function.DependencySource{Cached: true, AtStart: true}
	for name, tc := range map[string]struct {
		dep  *appsv1.Deployment
		pods []corev1.Pod
		want function.DependencySource
	}{
		"no Deployment, no word":             {nil, nil, none},
		"no Deployment, an install said so":  {nil, []corev1.Pod{installed(cachedMsg, 0)}, heldOnly},
		"running, an install said so":        {deploymentAt(1, false, false), []corev1.Pod{installed(cachedMsg, 0)}, heldOnly},
		"at zero, an install said so":        {deploymentAt(0, false, false), []corev1.Pod{installed(cachedMsg, 0)}, atStart},
		"at zero, remembered":                {deploymentAt(0, true, false), nil, atStart},
		"running, remembered":                {deploymentAt(2, true, false), nil, heldOnly},
		"running, fetching at start already": {deploymentAt(2, true, true), nil, atStart},
		"fetching at start, found missing":   {deploymentAt(1, true, true), []corev1.Pod{installed(cachedMsg, 0), hostEnded(missingMsg, runtimes.DependencyMissingExit)}, none},
		"missing, other exit code":           {deploymentAt(1, true, true), []corev1.Pod{hostEnded(missingMsg, 1)}, atStart},
		"another set's word":                 {deploymentAt(0, false, false), []corev1.Pod{installed(runtimes.DependencyCachedMessage+other, 0)}, none},
		"another set remembered": {func() *appsv1.Deployment {
			d := deploymentAt(0, false, false)
			d.Annotations = map[string]string{resources.AnnotationDependenciesCached: other}
			return d
		}(), nil, none},
		"a failed install's word":        {deploymentAt(0, false, false), []corev1.Pod{installed(cachedMsg, 1)}, none},
		"part of a line":                 {deploymentAt(0, false, false), []corev1.Pod{installed("x"+cachedMsg, 0)}, none},
		"said by the function container": {deploymentAt(0, false, false), []corev1.Pod{hostEnded(cachedMsg, 0)}, none},
		"scaling down, a pod left":       {func() *appsv1.Deployment { d := deploymentAt(0, true, false); d.Status.Replicas = 1; return d }(), nil, heldOnly},
	} {
		assert.Equal(t, tc.want, function.DependenciesFromCache(testSet, tc.dep, tc.pods), name)
	}
}

// TestPodsFetchDependenciesAtStartOnceCached, on the API server: a
// Function's pods install their dependencies until one says the cache
// holds the set; the Deployment then remembers it, and once the Function
// is at zero its pods are rendered without the install container, their
// host fetching the set at start. When a host finds the set gone, the
// pods install again and the Deployment forgets. Fails when a running
// Function is rolled, the memory is lost, or a missing set keeps the pods
// fetching.
func TestPodsFetchDependenciesAtStartOnceCached(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("deps", ns, fntest.Source(fntest.HelloJS, fntest.PackageJSON)))
	key := client.ObjectKeyFromObject(fn)
	d := deploymentOf(t, key)
	require.Len(t, d.Spec.Template.Spec.InitContainers, 1, "installed at first")
	set := runtimes.DependencySet("nodejs22", d.Spec.Template.Annotations[resources.AnnotationDepsHash])
	state := func(d *appsv1.Deployment) (remembered, atStart bool) {
		return d.Annotations[resources.AnnotationDependenciesCached] == set, len(d.Spec.Template.Spec.InitContainers) == 0 &&
			fntest.EnvValue(functionContainer(d), runtimes.EnvDependencyHash) != ""
	}
	waitFor := func(wantRemembered, wantAtStart bool) *appsv1.Deployment {
		t.Helper()
		var got *appsv1.Deployment
		eventually(t, func() error {
			got = &appsv1.Deployment{}
			if err := read(key, got); err != nil {
				return err
			}
			if r, a := state(got); r != wantRemembered || a != wantAtStart {
				return fmt.Errorf("remembered %v, at start %v", r, a)
			}
			return nil
		})
		return got
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "deps-abc", Namespace: ns, Labels: d.Spec.Template.Labels},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: resources.ContainerInstallDeps, Image: "kfn/runtime-nodejs22:latest"}},
			Containers:     []corev1.Container{{Name: resources.ContainerFunction, Image: "kfn/runtime-nodejs22:latest"}},
		},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{{
		Name:  resources.ContainerInstallDeps,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: runtimes.DependencyCachedMessage + set + "\n"}},
	}}}
	require.NoError(t, cluster.Client.Status().Update(testCtx(t), pod))
	waitFor(true, false) // running: not rolled

	update(t, key, func(f *v1alpha2.Function) { f.Spec.Replicas = ptr.To[int32](0) })
	eventually(t, func() error {
		got := &appsv1.Deployment{}
		if err := read(key, got); err != nil {
			return err
		}
		if n := ptr.Deref(got.Spec.Replicas, 1); n != 0 {
			return fmt.Errorf("%d replicas", n)
		}
		return nil
	})
	markReady(t, key) // no pod left
	d = waitFor(true, true)
	assert.Equal(t, runtimes.PodDepsDir, fntest.EnvValue(functionContainer(d), runtimes.EnvDepsDir))

	update(t, key, func(f *v1alpha2.Function) { f.Spec.Replicas = ptr.To[int32](1) })
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:                 resources.ContainerFunction,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: runtimes.DependencyMissingExit, Message: runtimes.DependencyMissingMessage + set + "\n"}},
	}}
	require.NoError(t, cluster.Client.Status().Update(testCtx(t), pod))
	d = waitFor(false, false)
	require.Len(t, d.Spec.Template.Spec.InitContainers, 1, "installed again")
	if _, ok := d.Annotations[resources.AnnotationDependenciesCached]; ok {
		require.NoError(t, errors.New("the Deployment still says the cache holds the set"))
	}
}
