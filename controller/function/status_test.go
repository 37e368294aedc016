package function_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/test/fntest"
)

// deploymentOfReplicas is a Deployment of replicas at generation 2 whose status the
// modifiers write.
func deploymentOfReplicas(replicas int32, mods ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "fn", Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
	for _, m := range mods {
		m(d)
	}
	return d
}

// rolledOut is the status of a Deployment that observed its generation and
// runs it in every replica, of which available are available.
func rolledOut(available int32) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: available, AvailableReplicas: available}
	}
}

func withCondition(c appsv1.DeploymentCondition) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Status.Conditions = append(d.Status.Conditions, c) }
}

func TestRunningCondition(t *testing.T) {
	crashing := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fn-1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "function", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Message: "boom\n"}},
	}}}}
	starting := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fn-2"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "function", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	}}}}
	tests := map[string]struct {
		in      function.RunningInput
		status  metav1.ConditionStatus
		reason  v1alpha2.ConditionReason
		message string
	}{
		"no Deployment yet": {in: function.RunningInput{},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentWaiting, message: "waiting for the Deployment to be created"},
		"all available": {in: function.RunningInput{Deployment: deploymentOfReplicas(3, rolledOut(3)), MinReplicas: 3},
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonDeploymentReady, message: "Function fn is ready"},
		"as many available as needed": {in: function.RunningInput{Deployment: deploymentOfReplicas(3, rolledOut(2)), MinReplicas: 2},
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonDeploymentReady},
		"one available fewer than needed": {in: function.RunningInput{Deployment: deploymentOfReplicas(3, rolledOut(2)), MinReplicas: 3},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonMinReplicasNotAvailable, message: "Deployment fn has 2 available replicas, 3 needed"},
		"none available": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(0)), MinReplicas: 1},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonMinReplicasNotAvailable, message: "Deployment fn has 0 available replicas, 1 needed"},
		"a minimum of zero needs one": {in: function.RunningInput{Deployment: deploymentOfReplicas(2, rolledOut(0)), MinReplicas: 0},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonMinReplicasNotAvailable, message: "0 available replicas, 1 needed"},
		"the need is capped by the replicas": {in: function.RunningInput{Deployment: deploymentOfReplicas(2, rolledOut(2)), MinReplicas: 5},
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonDeploymentReady},
		"a failing pod, whatever is available": {in: function.RunningInput{Deployment: deploymentOfReplicas(2, rolledOut(1)), MinReplicas: 2, Pods: []corev1.Pod{starting, crashing}},
			status: metav1.ConditionFalse, reason: v1alpha2.ReasonDeploymentFailed,
			message: "Deployment fn fails: pod fn-1 container function: CrashLoopBackOff: back-off (last exit code 3: boom)"},
		"a pod still starting": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(0)), MinReplicas: 1, Pods: []corev1.Pod{starting}},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonMinReplicasNotAvailable},
		"progress deadline exceeded": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(0), withCondition(appsv1.DeploymentCondition{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "took too long"})), MinReplicas: 1},
			status: metav1.ConditionFalse, reason: v1alpha2.ReasonDeploymentFailed, message: "Deployment fn: took too long"},
		"still progressing": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(0), withCondition(appsv1.DeploymentCondition{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"})), MinReplicas: 1},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonMinReplicasNotAvailable},
		"replica failure": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(0), withCondition(appsv1.DeploymentCondition{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"})), MinReplicas: 1},
			status: metav1.ConditionFalse, reason: v1alpha2.ReasonDeploymentFailed, message: "Deployment fn: FailedCreate: quota"},
		"created now": {in: function.RunningInput{Deployment: deploymentOfReplicas(1), MinReplicas: 1, Change: function.RolloutCreated},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentCreated, message: "Deployment fn created"},
		"updated now": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(1)), MinReplicas: 1, Change: function.RolloutUpdated},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentUpdated, message: "Deployment fn updated"},
		"generation not observed yet": {in: function.RunningInput{Deployment: deploymentOfReplicas(1, rolledOut(1), func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 1 }), MinReplicas: 1},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentWaiting},
		"rolling out": {in: function.RunningInput{Deployment: deploymentOfReplicas(3, rolledOut(3), func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 2 }), MinReplicas: 1},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentWaiting, message: "Deployment fn is rolling out: 2 of 3 replicas updated, 3 available"},
		"an old pod still running": {in: function.RunningInput{Deployment: deploymentOfReplicas(3, rolledOut(3), func(d *appsv1.Deployment) { d.Status.Replicas = 4 }), MinReplicas: 1},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentWaiting},
		"scaled to zero": {in: function.RunningInput{Deployment: deploymentOfReplicas(0, rolledOut(0)), ScalesToZero: true},
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonScaledToZero, message: "Function fn is scaled to zero and starts on the next event or request"},
		"zero replicas asked for": {in: function.RunningInput{Deployment: deploymentOfReplicas(0, rolledOut(0))},
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonDeploymentReady, message: "Function fn runs 0 replicas, as spec.replicas asks"},
		"scaling to zero, a pod left": {in: function.RunningInput{Deployment: deploymentOfReplicas(0, rolledOut(0), func(d *appsv1.Deployment) { d.Status.Replicas = 1 }), ScalesToZero: true},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonDeploymentWaiting},
		"no replicas field is one": {in: function.RunningInput{Deployment: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "fn"},
			Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}},
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonDeploymentReady},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := function.RunningCondition(tt.in)
			assert.Equal(t, v1alpha2.ConditionRunning, c.Type)
			assert.Equal(t, tt.status, c.Status, c.Message)
			assert.Equal(t, tt.reason, c.Reason, c.Message)
			if tt.message != "" {
				assert.Contains(t, c.Message, tt.message)
			}
		})
	}
}

// A Deployment rolled out with fewer available replicas than the Function
// asks for is Running Unknown with Kyma's MinReplicasNotAvailable, until
// enough are available.
func TestRolledOutWithTooFewAvailableReplicas(t *testing.T) {
	ns := namespace(t)
	fn := create(t, fntest.Function("few", ns, fntest.Replicas(3)))
	key := client.ObjectKeyFromObject(fn)
	eventually(t, func() error {
		d, err := deployment(key)
		if err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: 1, AvailableReplicas: 1}
		return cluster.Client.Status().Update(testCtx(t), d)
	})
	got := condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionUnknown, v1alpha2.ReasonMinReplicasNotAvailable)
	assert.Equal(t, "Deployment few has 1 available replicas, 3 needed", got.Status.Condition(v1alpha2.ConditionRunning).Message)
	assert.False(t, got.Status.IsReady())

	markReady(t, key)
	condition(t, key, v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
}
