package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionType names a Function condition.
type ConditionType string

// The Function condition types of Kyma's current (buildless) API, shown as
// CONFIGURED and RUNNING, and the deprecated BuildReady.
const (
	// ConditionConfigurationReady is True once the spec is valid, the
	// source is resolved and stored (the source ConfigMap written).
	ConditionConfigurationReady ConditionType = "ConfigurationReady"
	// ConditionRunning is True once the Deployment has its minimum number of
	// ready replicas.
	ConditionRunning ConditionType = "Running"
	// ConditionBuildReady is deprecated: Kyma's build-based releases had it,
	// its current API has not. kfn builds no image and keeps writing it only
	// for clients of those releases (kubectl wait --for=condition=BuildReady,
	// scripts, older CLIs), as a copy of ConfigurationReady (see
	// FunctionStatus.MirrorBuildReady). It is not part of ConditionTypes.
	ConditionBuildReady ConditionType = "BuildReady"
)

// ConditionTypes lists the condition types of Kyma's current API in
// processing order: a Function is ready when all are True.
var ConditionTypes = []ConditionType{ConditionConfigurationReady, ConditionRunning}

// ConditionReason is the machine-readable reason of a Function condition;
// the names are Kyma's.
type ConditionReason string

// The condition reasons. Each names the condition types it is used with.
// ServiceCreated, ServiceUpdated and the HorizontalPodAutoscaler reasons
// are Kyma's and stay for the clients that switch on them, though kfn
// sets none of them (its Running condition follows the Deployment).
const (
	// ReasonFunctionSpecValidated (ConfigurationReady True): the spec is valid.
	ReasonFunctionSpecValidated ConditionReason = "FunctionSpecValidated"
	// ReasonInvalidFunctionSpec (ConfigurationReady False): the message lists what to fix.
	ReasonInvalidFunctionSpec ConditionReason = "InvalidFunctionSpec"
	// ReasonSourceUpdated (ConfigurationReady True): a Git reference was resolved.
	ReasonSourceUpdated ConditionReason = "SourceUpdated"
	// ReasonSourceUpdateFailed (ConfigurationReady False): a Git reference could not be resolved.
	ReasonSourceUpdateFailed ConditionReason = "SourceUpdateFailed"
	// ReasonConfigMapError (ConfigurationReady False, as in Kyma's older
	// releases): the source ConfigMap could not be written.
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

// BuildReadyMessage is the message of the deprecated BuildReady condition.
const BuildReadyMessage = "deprecated: kfn builds no image; BuildReady repeats ConfigurationReady for clients of Kyma's build-based releases"

// MirrorBuildReady sets the deprecated BuildReady condition to the status
// and reason of ConfigurationReady (removing it when there is none), so a
// client that waits for BuildReady sees what a build-based Kyma would have
// shown: True once the Function is configured, False with the same reason
// when it cannot be.
func (s *FunctionStatus) MirrorBuildReady(generation int64) {
	c := s.Condition(ConditionConfigurationReady)
	if c == nil {
		meta.RemoveStatusCondition(&s.Conditions, string(ConditionBuildReady))
		return
	}
	s.SetCondition(ConditionBuildReady, c.Status, ConditionReason(c.Reason), BuildReadyMessage, generation)
}
