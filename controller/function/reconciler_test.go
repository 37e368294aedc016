package function_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
)

// markReady writes the status a kube-controller-manager would write once
// every replica of the Deployment runs its current template.
func markReady(t *testing.T, key types.NamespacedName) {
	t.Helper()
	eventually(t, func() error {
		d := &appsv1.Deployment{}
		if err := cluster.Client.Get(testCtx(t), key, d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		return cluster.Client.Status().Update(testCtx(t), d)
	})
}

func deploymentOf(t *testing.T, key types.NamespacedName) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	eventually(t, func() error { return read(key, d) })
	return d
}

// deployment reads the Deployment for a condition (see read).
func deployment(key types.NamespacedName) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, read(key, d)
}

func functionContainer(d *appsv1.Deployment) corev1.Container {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == resources.ContainerFunction {
			return c
		}
	}
	return corev1.Container{}
}

func TestCreateInlineFunction(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("hello", ns, fntest.Source(fntest.HelloJS, fntest.PackageJSON), fntest.Env("GREETING", "hi")))
	key := client.ObjectKeyFromObject(fn)

	got := condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting)
	assert.Equal(t, metav1.ConditionTrue, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Status)
	assert.Equal(t, string(v1alpha2.ReasonFunctionSpecValidated), got.Status.Condition(v1alpha2.ConditionConfigurationReady).Reason)
	assert.Contains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "ConfigMap hello holds the source")
	build := got.Status.Condition(v1alpha2.ConditionBuildReady)
	require.NotNil(t, build, "the deprecated BuildReady is still written for older clients")
	assert.Equal(t, metav1.ConditionTrue, build.Status)
	assert.Equal(t, string(v1alpha2.ReasonFunctionSpecValidated), build.Reason)
	assert.Equal(t, v1alpha2.BuildReadyMessage, build.Message)
	assert.Equal(t, v1alpha2.NodeJS22, got.Status.Runtime)
	assert.Equal(t, "kfn/runtime-nodejs22:latest", got.Status.RuntimeImage)
	assert.Equal(t, "L", got.Status.FunctionResourceProfile)
	assert.Contains(t, got.Status.PodSelector, v1alpha2.LabelFunctionName+"=hello")
	assert.Equal(t, got.Generation, got.Status.ObservedGeneration)

	cm := &corev1.ConfigMap{}
	require.True(t, get(t, key, cm))
	assert.Equal(t, fntest.HelloJS, cm.Data["handler.js"])
	assert.Equal(t, fntest.PackageJSON, cm.Data["package.json"])
	assert.Equal(t, got.UID, metav1.GetControllerOf(cm).UID)

	svc := &corev1.Service{}
	require.True(t, get(t, key, svc))
	assert.Equal(t, int32(80), svc.Spec.Ports[0].Port)
	assert.Equal(t, got.SelectorLabels(), svc.Spec.Selector)

	d := deploymentOf(t, key)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, "hi", fntest.EnvValue(functionContainer(d), "GREETING"))
	require.Len(t, d.Spec.Template.Spec.InitContainers, 1, "dependencies are installed")

	markReady(t, key)
	got = condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.True(t, got.Status.IsReady())
	assert.Equal(t, int32(1), got.Status.Replicas)

	// Events on transitions.
	eventually(t, func() error {
		evs := &eventsv1.EventList{}
		if err := cluster.Client.List(testCtx(t), evs, client.InNamespace(ns)); err != nil {
			return err
		}
		reasons := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.Name == "hello" {
				reasons[e.Reason] = true
			}
		}
		for _, r := range []string{"FunctionSpecValidated", "DeploymentCreated", "DeploymentReady"} {
			if !reasons[r] {
				return fmt.Errorf("no %s event in %v", r, reasons)
			}
		}
		return nil
	})
}

func TestUpdateRevertAndEnvOnlyChange(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("upd", ns))
	key := client.ObjectKeyFromObject(fn)
	d0 := deploymentOf(t, key)
	hash0 := d0.Spec.Template.Annotations[resources.AnnotationSourceHash]
	markReady(t, key)
	condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	cm0 := &corev1.ConfigMap{}
	require.True(t, get(t, key, cm0))

	// An env-only change rolls the pods' env and leaves the ConfigMap alone.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Env = []v1alpha2.EnvVar{{Name: "MODE", Value: "fast"}} })
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if v := fntest.EnvValue(functionContainer(d), "MODE"); v != "fast" {
			return fmt.Errorf("MODE is %q", v)
		}
		return nil
	})
	condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting)
	cm := &corev1.ConfigMap{}
	require.True(t, get(t, key, cm))
	assert.Equal(t, cm0.ResourceVersion, cm.ResourceVersion, "env change must not touch the ConfigMap")
	assert.Equal(t, hash0, deploymentOf(t, key).Spec.Template.Annotations[resources.AnnotationSourceHash])
	markReady(t, key)
	condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)

	// A source change updates the ConfigMap and rolls the Deployment.
	const v2 = "module.exports = { main: () => 'v2' };\n"
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Source.Inline.Source = v2 })
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if h := d.Spec.Template.Annotations[resources.AnnotationSourceHash]; h == hash0 {
			return errors.New("template still has the old source hash")
		}
		return nil
	})
	require.True(t, get(t, key, cm))
	assert.Equal(t, v2, cm.Data["handler.js"])
	condition(t, key, v1alpha2.ConditionBuildReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)

	// A revert goes back to the first template.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Source.Inline.Source = fntest.HelloJS })
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if h := d.Spec.Template.Annotations[resources.AnnotationSourceHash]; h != hash0 {
			return errors.New("template not reverted")
		}
		return nil
	})
	d := deploymentOf(t, key)
	assert.Equal(t, int32(0), d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntVal)
}

func TestInvalidSpec(t *testing.T) {
	ns := namespace(t)
	// Accepted by the CRD, refused by Function.Validate (a label value Kubernetes refuses).
	fn := create(t, fntest.Function("bad", ns, fntest.Labels(map[string]string{"team": "not a valid value!"})))
	key := client.ObjectKeyFromObject(fn)
	got := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)
	assert.Contains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "spec.labels")
	assert.False(t, get(t, key, &appsv1.Deployment{}), "nothing runs for an invalid Function")
	// What a client of Kyma's build-based releases waits for fails the same way.
	condition(t, key, v1alpha2.ConditionBuildReady, metav1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)

	// Fixing it makes it run.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Labels = map[string]string{"team": "a"} })
	condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	condition(t, key, v1alpha2.ConditionBuildReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	deploymentOf(t, key)
}

// TestStatusForKymaClients reads a Function's status the ways Kyma's
// clients do: the current API (Busola, the Kyma CLI: ConfigurationReady
// and Running, ready when all conditions are True, failed when any is
// False), and a client of the build-based releases that waits for
// BuildReady. A status written by an older kfn (BuildReady with its own
// reason) is brought in line.
func TestStatusForKymaClients(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("clients", ns))
	key := client.ObjectKeyFromObject(fn)
	markReady(t, key)
	got := condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)

	types := map[string]metav1.ConditionStatus{}
	for _, c := range got.Status.Conditions {
		types[c.Type] = c.Status
	}
	assert.Equal(t, map[string]metav1.ConditionStatus{"ConfigurationReady": "True", "Running": "True", "BuildReady": "True"}, types,
		"every condition True: ready for Busola's 'all True' and for kubectl wait --for=condition=BuildReady")

	// An older kfn wrote BuildReady with its ConfigMap reasons.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f := &v1alpha2.Function{}
		if !get(t, key, f) {
			return errors.New("function not found")
		}
		f.Status.SetCondition(v1alpha2.ConditionBuildReady, metav1.ConditionFalse, "ConfigMapError", "from an older kfn", f.Generation)
		return cluster.Client.Status().Update(testCtx(t), f)
	}))
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Env = []v1alpha2.EnvVar{{Name: "WAKE", Value: "1"}} })
	got = condition(t, key, v1alpha2.ConditionBuildReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	assert.Equal(t, v1alpha2.BuildReadyMessage, got.Status.Condition(v1alpha2.ConditionBuildReady).Message)
}

func TestDeleteAndRecreate(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("gone", ns, fntest.Scale(1, 3)))
	key := client.ObjectKeyFromObject(fn)
	old := deploymentOf(t, key)
	eventually(t, func() error { return cluster.Client.Get(testCtx(t), key, &autoscalingv2.HorizontalPodAutoscaler{}) })

	require.NoError(t, cluster.Client.Delete(testCtx(t), fn))
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
		eventually(t, func() error {
			if err := cluster.Client.Get(testCtx(t), key, obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T still there (%v)", obj, err)
			}
			return nil
		})
	}

	// A new Function of the same name gets its own Deployment (the selector holds the UID).
	again := create(t, fntest.Function("gone", ns))
	eventually(t, func() error {
		d := &appsv1.Deployment{}
		if err := cluster.Client.Get(testCtx(t), key, d); err != nil {
			return err
		}
		if d.UID == old.UID || metav1.GetControllerOf(d).UID != again.UID {
			return errors.New("still the old Deployment")
		}
		return nil
	})
}

func TestOrphanOfEarlierFunctionIsReplaced(t *testing.T) {
	ns := namespace(t)
	fn := fntest.Function("orphan", ns)
	key := client.ObjectKeyFromObject(fn)
	// A Deployment left behind by a deleted Function of the same name (no garbage collector in envtest).
	stale := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns, Labels: map[string]string{v1alpha2.LabelManagedBy: v1alpha2.LabelManagedByValue, v1alpha2.LabelFunctionName: "orphan"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: "orphan", UID: "dead", Controller: ptr.To(true)}}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
		},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), stale))
	created := create(t, fn)
	eventually(t, func() error {
		d := &appsv1.Deployment{}
		if err := cluster.Client.Get(testCtx(t), key, d); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != created.UID {
			return errors.New("stale Deployment not replaced")
		}
		return nil
	})
}

func TestFailingPodShowsContainerReason(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("crash", ns))
	key := client.ObjectKeyFromObject(fn)
	d := deploymentOf(t, key)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash-abc", Namespace: ns, Labels: d.Spec.Template.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "function", Image: "kfn/runtime-nodejs22:latest"}}},
	}
	require.NoError(t, cluster.Client.Create(testCtx(t), pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name:                 "function",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "SyntaxError: Unexpected token"}},
	}}}
	require.NoError(t, cluster.Client.Status().Update(testCtx(t), pod))

	got := condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionFalse, v1alpha2.ReasonDeploymentFailed)
	msg := got.Status.Condition(v1alpha2.ConditionRunning).Message
	assert.Contains(t, msg, "CrashLoopBackOff")
	assert.Contains(t, msg, "SyntaxError: Unexpected token")

	// Once the pod recovers and the Deployment is available, Running is True again.
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	require.NoError(t, cluster.Client.Status().Update(testCtx(t), pod))
	markReady(t, key)
	condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
}

func TestHPAAndReplicasOwnedByTheAutoscaler(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("cpu", ns, fntest.Scale(1, 4)))
	key := client.ObjectKeyFromObject(fn)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	eventually(t, func() error { return cluster.Client.Get(testCtx(t), key, hpa) })
	assert.Equal(t, int32(4), hpa.Spec.MaxReplicas)
	assert.Equal(t, "cpu", hpa.Spec.ScaleTargetRef.Name)

	// The autoscaler (another field manager) scales the Deployment.
	scale := appsv1ac.Deployment("cpu", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(3))
	require.NoError(t, cluster.Client.Apply(testCtx(t), scale, client.FieldOwner("horizontal-pod-autoscaler"), client.ForceOwnership))

	// A change of the Function does not take the replicas back.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Env = []v1alpha2.EnvVar{{Name: "X", Value: "1"}} })
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if fntest.EnvValue(functionContainer(d), "X") != "1" {
			return errors.New("env not applied yet")
		}
		return nil
	})
	assert.Equal(t, int32(3), *deploymentOf(t, key).Spec.Replicas, "the controller never fights the autoscaler")

	// Back to fixed replicas: the HPA goes, spec.replicas is the controller's again.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.ScaleConfig = nil; f.Spec.Replicas = ptr.To[int32](2) })
	eventually(t, func() error {
		if err := cluster.Client.Get(testCtx(t), key, &autoscalingv2.HorizontalPodAutoscaler{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("HPA still there: %v", err)
		}
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if r := *d.Spec.Replicas; r != 2 {
			return fmt.Errorf("replicas %d", r)
		}
		return nil
	})

	// kubectl scale fn (the scale subresource) reaches the Deployment.
	f := &v1alpha2.Function{}
	require.True(t, get(t, key, f))
	require.NoError(t, cluster.Client.SubResource("scale").Update(testCtx(t), f,
		client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}})))
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		if r := *d.Spec.Replicas; r != 5 {
			return fmt.Errorf("replicas %d", r)
		}
		return nil
	})
}

func TestGitFunctionRollsOutWhenTheReferenceMoves(t *testing.T) {
	repo := newGitRepo(t)
	c1 := repo.Commit(t, map[string]string{"fns/hello/handler.js": "v1", "fns/hello/package.json": "{}"})
	ns := namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds", Namespace: ns},
		Data: map[string][]byte{"username": []byte(gitUser), "password": []byte(gitPassword)}}
	require.NoError(t, cluster.Client.Create(testCtx(t), secret))
	fn := create(t, fntest.Function("gitfn", ns, fntest.Git(repo.URL, "/fns/hello", "main", &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "git-creds"})))
	key := client.ObjectKeyFromObject(fn)

	got := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonSourceUpdated)
	require.NotNil(t, got.Status.GitRepository)
	assert.Equal(t, c1, got.Status.GitRepository.Commit)
	assert.Equal(t, repo.URL, got.Status.GitRepository.URL)
	assert.Equal(t, "main", got.Status.GitRepository.Reference)
	d := deploymentOf(t, key)
	fetch := d.Spec.Template.Spec.InitContainers[0]
	assert.Equal(t, resources.ContainerFetchSource, fetch.Name)
	assert.Contains(t, fetch.Args, "--commit="+c1)
	assert.False(t, get(t, key, &corev1.ConfigMap{}), "a Git Function has no source ConfigMap")

	c2 := repo.Commit(t, map[string]string{"fns/hello/handler.js": "v2"})
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		args := d.Spec.Template.Spec.InitContainers[0].Args
		if !containsString(args, "--commit="+c2) {
			return fmt.Errorf("still %v", args)
		}
		return nil
	})
	eventually(t, func() error {
		f := &v1alpha2.Function{}
		if err := cluster.Client.Get(testCtx(t), key, f); err != nil {
			return err
		}
		if f.Status.GitRepository.Commit != c2 {
			return errors.New("status not updated")
		}
		return nil
	})

	// A reference that does not exist: SourceUpdateFailed, and the running Deployment stays.
	update(t, key, func(f *v1alpha2.Function) { f.Spec.Source.GitRepository.Reference = "no-such-branch" })
	got = condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed)
	assert.Contains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "no-such-branch")
	assert.True(t, get(t, key, &appsv1.Deployment{}))
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// waitGone waits until obj (by key) is not found.
func waitGone(t *testing.T, ctx context.Context, key types.NamespacedName, obj client.Object) {
	t.Helper()
	eventually(t, func() error {
		if err := cluster.Client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s still there (%v)", obj, key, err)
		}
		return nil
	})
}
