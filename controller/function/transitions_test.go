package function_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
)

// Transitions gives one Event per condition whose status or reason
// changed (a new message alone is none), in processing order, a Warning
// for a condition turned False and Normal otherwise.
func TestTransitions(t *testing.T) {
	cond := func(typ v1alpha2.ConditionType, status metav1.ConditionStatus, reason v1alpha2.ConditionReason, msg string) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: status, Reason: string(reason), Message: msg}
	}
	configured := cond(v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated, "ok")
	waiting := cond(v1alpha2.ConditionRunning, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting, "rolling out")
	ready := cond(v1alpha2.ConditionRunning, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "ready")
	failed := cond(v1alpha2.ConditionRunning, metav1.ConditionFalse, v1alpha2.ReasonDeploymentFailed, "crash")

	for name, tc := range map[string]struct {
		before, after []metav1.Condition
		want          []function.ConditionEvent
	}{
		"first status": {
			after: []metav1.Condition{waiting, configured},
			want: []function.ConditionEvent{
				{Type: corev1.EventTypeNormal, Reason: string(v1alpha2.ReasonFunctionSpecValidated), Message: "ConfigurationReady True: ok"},
				{Type: corev1.EventTypeNormal, Reason: string(v1alpha2.ReasonDeploymentWaiting), Message: "Running Unknown: rolling out"},
			},
		},
		"nothing changed": {before: []metav1.Condition{configured, waiting}, after: []metav1.Condition{configured, waiting}},
		"only the message changed": {
			before: []metav1.Condition{configured, waiting},
			after:  []metav1.Condition{configured, cond(v1alpha2.ConditionRunning, metav1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting, "1 of 2")},
		},
		"status changed": {
			before: []metav1.Condition{configured, waiting},
			after:  []metav1.Condition{configured, ready},
			want:   []function.ConditionEvent{{Type: corev1.EventTypeNormal, Reason: string(v1alpha2.ReasonDeploymentReady), Message: "Running True: ready"}},
		},
		"reason changed, status not": {
			before: []metav1.Condition{configured, waiting},
			after:  []metav1.Condition{configured, cond(v1alpha2.ConditionRunning, metav1.ConditionUnknown, v1alpha2.ReasonMinReplicasNotAvailable, "1 of 2")},
			want: []function.ConditionEvent{{Type: corev1.EventTypeNormal, Reason: string(v1alpha2.ReasonMinReplicasNotAvailable),
				Message: "Running Unknown: 1 of 2"}},
		},
		"turned False": {
			before: []metav1.Condition{configured, ready},
			after:  []metav1.Condition{configured, failed},
			want:   []function.ConditionEvent{{Type: corev1.EventTypeWarning, Reason: string(v1alpha2.ReasonDeploymentFailed), Message: "Running False: crash"}},
		},
		"a condition gone": {before: []metav1.Condition{configured, ready}, after: []metav1.Condition{configured}},
	} {
		assert.Equal(t, tc.want, function.Transitions(tc.before, tc.after), name)
	}
}
