package function

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// Condition is a Function condition as data, before it is stamped with a
// generation and a transition time.
type Condition struct {
	Type    v1alpha2.ConditionType
	Status  metav1.ConditionStatus
	Reason  v1alpha2.ConditionReason
	Message string
}

// failingWaitingReasons are container waiting reasons that mean the
// container will not start without a change.
var failingWaitingReasons = []string{
	"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "ErrImageNeverPull",
}

// RolloutChange says what this reconcile did to the Deployment.
type RolloutChange int

// The rollout changes.
const (
	// RolloutUnchanged: the Deployment was already as desired.
	RolloutUnchanged RolloutChange = iota
	// RolloutCreated: the Deployment was created.
	RolloutCreated
	// RolloutUpdated: the Deployment's spec was changed.
	RolloutUpdated
)

// RunningInput is what the Running condition is computed from.
type RunningInput struct {
	// Deployment is the Function's Deployment as last seen.
	Deployment *appsv1.Deployment
	// Pods are the Function's pods; only read when the Deployment is not
	// ready.
	Pods []corev1.Pod
	// Change is what this reconcile did to the Deployment.
	Change RolloutChange
	// MinReplicas is how many ready replicas make the Function ready
	// (capped by the Deployment's replicas).
	MinReplicas int32
	// ScalesToZero is true for a Function that may run no replica.
	ScalesToZero bool
}

// RunningCondition computes the Running condition from the Deployment's
// status and, when it is not ready, from its pods: a failing container
// makes it False with the container's own reason; a Deployment that runs
// the current spec with enough available replicas makes it True; anything
// in between is Unknown, with the reason saying what is awaited.
func RunningCondition(in RunningInput) Condition {
	c := Condition{Type: v1alpha2.ConditionRunning}
	d := in.Deployment
	if d == nil {
		return set(c, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting, "waiting for the Deployment to be created")
	}
	if msg := podFailure(in.Pods); msg != "" {
		return set(c, metav1.ConditionFalse, v1alpha2.ReasonDeploymentFailed, fmt.Sprintf("Deployment %s fails: %s", d.Name, msg))
	}
	for _, dc := range d.Status.Conditions {
		if dc.Type == appsv1.DeploymentProgressing && dc.Status == corev1.ConditionFalse && dc.Reason == "ProgressDeadlineExceeded" {
			return set(c, metav1.ConditionFalse, v1alpha2.ReasonDeploymentFailed, fmt.Sprintf("Deployment %s: %s", d.Name, dc.Message))
		}
		if dc.Type == appsv1.DeploymentReplicaFailure && dc.Status == corev1.ConditionTrue {
			return set(c, metav1.ConditionFalse, v1alpha2.ReasonDeploymentFailed, fmt.Sprintf("Deployment %s: %s: %s", d.Name, dc.Reason, dc.Message))
		}
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	st := d.Status
	current := st.ObservedGeneration >= d.Generation && in.Change == RolloutUnchanged
	rolledOut := current && st.UpdatedReplicas == replicas && st.Replicas == replicas
	need := min(max(in.MinReplicas, 1), replicas)
	switch {
	case replicas == 0 && current && st.Replicas == 0:
		if in.ScalesToZero {
			return set(c, metav1.ConditionTrue, v1alpha2.ReasonScaledToZero, fmt.Sprintf("Function %s is scaled to zero and starts on the next event or request", d.Name))
		}
		return set(c, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, fmt.Sprintf("Function %s runs 0 replicas, as spec.replicas asks", d.Name))
	case rolledOut && st.AvailableReplicas >= need:
		return set(c, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, fmt.Sprintf("Function %s is ready", d.Name))
	case in.Change == RolloutCreated:
		return set(c, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentCreated, fmt.Sprintf("Deployment %s created", d.Name))
	case in.Change == RolloutUpdated:
		return set(c, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentUpdated, fmt.Sprintf("Deployment %s updated", d.Name))
	case !rolledOut:
		return set(c, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting,
			fmt.Sprintf("Deployment %s is rolling out: %d of %d replicas updated, %d available", d.Name, st.UpdatedReplicas, replicas, st.AvailableReplicas))
	default:
		return set(c, metav1.ConditionUnknown, v1alpha2.ReasonMinReplicasNotAvailable,
			fmt.Sprintf("Deployment %s has %d available replicas, %d needed", d.Name, st.AvailableReplicas, need))
	}
}

func set(c Condition, s metav1.ConditionStatus, r v1alpha2.ConditionReason, msg string) Condition {
	c.Status, c.Reason, c.Message = s, r, msg
	return c
}

// podFailure describes the first failing container of the pods (init
// containers included), in pod name order, or returns "".
func podFailure(pods []corev1.Pod) string {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			w := cs.State.Waiting
			if w == nil || !slices.Contains(failingWaitingReasons, w.Reason) {
				continue
			}
			msg := fmt.Sprintf("pod %s container %s: %s", p.Name, cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(" (last exit code %d", t.ExitCode)
				if t.Message != "" {
					msg += ": " + strings.TrimSpace(t.Message)
				}
				msg += ")"
			}
			return msg
		}
	}
	return ""
}

// ConditionEvent is a Kubernetes Event to emit for a condition that
// changed status or reason.
type ConditionEvent struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning (False).
	Type    string
	Reason  string
	Message string
}

// Transitions returns one event per condition type whose status or reason
// differs between before and after, in processing order.
func Transitions(before, after []metav1.Condition) []ConditionEvent {
	var out []ConditionEvent
	for _, t := range v1alpha2.ConditionTypes {
		a := findCondition(after, t)
		if a == nil {
			continue
		}
		if b := findCondition(before, t); b != nil && b.Status == a.Status && b.Reason == a.Reason {
			continue
		}
		typ := corev1.EventTypeNormal
		if a.Status == metav1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		out = append(out, ConditionEvent{Type: typ, Reason: a.Reason, Message: fmt.Sprintf("%s %s: %s", a.Type, a.Status, a.Message)})
	}
	return out
}

func findCondition(cs []metav1.Condition, t v1alpha2.ConditionType) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == string(t) {
			return &cs[i]
		}
	}
	return nil
}
