package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionType names one of a Function's three processing stages.
type ConditionType string

// The Function condition types, shown as CONFIGURED, BUILT and RUNNING.
const (
	// ConditionConfigurationReady is True once the spec is valid and the
	// source is resolved and stored.
	ConditionConfigurationReady ConditionType = "ConfigurationReady"
	// ConditionBuildReady is True once the source and dependency artifact is
	// prepared. kfn builds no image; the artifact is the source ConfigMap and,
	// with dependencies, their install step.
	ConditionBuildReady ConditionType = "BuildReady"
	// ConditionRunning is True once the Deployment has its minimum number of
	// ready replicas.
	ConditionRunning ConditionType = "Running"
)

// ConditionTypes lists the condition types in processing order.
var ConditionTypes = []ConditionType{ConditionConfigurationReady, ConditionBuildReady, ConditionRunning}

// ConditionReason is the machine-readable reason of a Function condition;
// the names are Kyma's.
type ConditionReason string

// The condition reasons. Each names the condition types it is used with.
const (
	// ReasonFunctionSpecValidated (ConfigurationReady True): the spec is valid.
	ReasonFunctionSpecValidated ConditionReason = "FunctionSpecValidated"
	// ReasonInvalidFunctionSpec (ConfigurationReady False): the message lists what to fix.
	ReasonInvalidFunctionSpec ConditionReason = "InvalidFunctionSpec"
	// ReasonSourceUpdated (ConfigurationReady True): a Git reference was resolved.
	ReasonSourceUpdated ConditionReason = "SourceUpdated"
	// ReasonSourceUpdateFailed (ConfigurationReady False): a Git reference could not be resolved.
	ReasonSourceUpdateFailed ConditionReason = "SourceUpdateFailed"
	// ReasonConfigMapCreated (BuildReady True): the source ConfigMap was created.
	ReasonConfigMapCreated ConditionReason = "ConfigMapCreated"
	// ReasonConfigMapUpdated (BuildReady True): the source ConfigMap was updated.
	ReasonConfigMapUpdated ConditionReason = "ConfigMapUpdated"
	// ReasonConfigMapError (BuildReady False): the source ConfigMap could not be written.
	ReasonConfigMapError ConditionReason = "ConfigMapError"
	// ReasonDeploymentCreated (Running Unknown): the Deployment was created.
	ReasonDeploymentCreated ConditionReason = "DeploymentCreated"
	// ReasonDeploymentUpdated (Running Unknown): the Deployment was updated.
	ReasonDeploymentUpdated ConditionReason = "DeploymentUpdated"
	// ReasonDeploymentWaiting (Running Unknown): the Deployment is rolling out.
	ReasonDeploymentWaiting ConditionReason = "DeploymentWaiting"
	// ReasonDeploymentReady (Running True): the Deployment is available.
	ReasonDeploymentReady ConditionReason = "DeploymentReady"
	// ReasonDeploymentFailed (Running False): the Deployment or its pods fail; the message has the pod's reason.
	ReasonDeploymentFailed ConditionReason = "DeploymentFailed"
	// ReasonMinReplicasNotAvailable (Running Unknown): fewer ready pods than the minimum.
	ReasonMinReplicasNotAvailable ConditionReason = "MinReplicasNotAvailable"
	// ReasonServiceCreated (Running Unknown): the Service was created.
	ReasonServiceCreated ConditionReason = "ServiceCreated"
	// ReasonServiceUpdated (Running Unknown): the Service was updated.
	ReasonServiceUpdated ConditionReason = "ServiceUpdated"
	// ReasonServiceFailed (Running False): the Service could not be written.
	ReasonServiceFailed ConditionReason = "ServiceFailed"
	// ReasonHorizontalPodAutoscalerCreated (Running Unknown): the autoscaler was created.
	ReasonHorizontalPodAutoscalerCreated ConditionReason = "HorizontalPodAutoscalerCreated"
	// ReasonHorizontalPodAutoscalerUpdated (Running Unknown): the autoscaler was updated.
	ReasonHorizontalPodAutoscalerUpdated ConditionReason = "HorizontalPodAutoscalerUpdated"
	// ReasonScaledToZero (Running True): the Function is scaled to zero on
	// purpose and starts on the next event or request (kfn addition).
	ReasonScaledToZero ConditionReason = "ScaledToZero"
)

// MaxConditionMessageLength is the longest condition message the API accepts.
const MaxConditionMessageLength = 32768

// Condition returns the condition of type t, or nil when there is none.
func (s *FunctionStatus) Condition(t ConditionType) *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, string(t))
}

// SetCondition sets the condition of type t for the given generation. The
// transition time changes only when the status changes; messages longer than
// the API allows are cut.
func (s *FunctionStatus) SetCondition(t ConditionType, status metav1.ConditionStatus, reason ConditionReason, message string, generation int64) {
	if len(message) > MaxConditionMessageLength {
		message = message[:MaxConditionMessageLength]
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type:               string(t),
		Status:             status,
		Reason:             string(reason),
		Message:            message,
		ObservedGeneration: generation,
	})
}

// IsReady reports whether every condition type is present and True, which is
// when Kyma considers a Function ready.
func (s *FunctionStatus) IsReady() bool {
	for _, t := range ConditionTypes {
		if !meta.IsStatusConditionTrue(s.Conditions, string(t)) {
			return false
		}
	}
	return true
}
