package resources

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"

	"github.com/kfn-dev/kfn/runtimes/plan"
)

// HorizontalPodAutoscaler builds the CPU autoscaler of a Function that
// scales between minReplicas >= 1 and a larger maxReplicas (Kyma's
// behaviour), targeting cfg.HPACPUUtilization percent of the CPU requests.
// It returns nil for any other Function.
func HorizontalPodAutoscaler(p plan.Plan, cfg Config) *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration {
	s := p.Scaling
	if !s.Autoscaled || s.MinReplicas < 1 || s.MaxReplicas <= s.MinReplicas {
		return nil
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(p.Name, p.Namespace).
		WithLabels(ObjectLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(autoscalingv2ac.HorizontalPodAutoscalerSpec().
			WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
				WithAPIVersion("apps/v1").WithKind("Deployment").WithName(p.Name)).
			WithMinReplicas(s.MinReplicas).
			WithMaxReplicas(s.MaxReplicas).
			WithMetrics(autoscalingv2ac.MetricSpec().
				WithType(autoscalingv2.ResourceMetricSourceType).
				WithResource(autoscalingv2ac.ResourceMetricSource().
					WithName(corev1.ResourceCPU).
					WithTarget(autoscalingv2ac.MetricTarget().
						WithType(autoscalingv2.UtilizationMetricType).
						WithAverageUtilization(cfg.HPACPUUtilization)))))
}
