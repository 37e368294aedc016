package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
)

func TestHorizontalPodAutoscaler(t *testing.T) {
	tests := map[string]struct {
		mods []fntest.Modifier
		want bool
	}{
		"fixed replicas":        {mods: nil},
		"min == max":            {mods: []fntest.Modifier{fntest.Scale(2, 2)}},
		"scale to zero":         {mods: []fntest.Modifier{fntest.Scale(0, 3)}},
		"max > min >= 1 scales": {mods: []fntest.Modifier{fntest.Scale(1, 4)}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.HPACPUUtilization = 60
			ac := resources.HorizontalPodAutoscaler(planFor(t, fntest.Function("f", "ns", tc.mods...)), cfg)
			if !tc.want {
				assert.Nil(t, ac)
				return
			}
			hpa := typed[autoscalingv2.HorizontalPodAutoscaler](t, ac)
			assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "f"}, hpa.Spec.ScaleTargetRef)
			assert.Equal(t, int32(1), *hpa.Spec.MinReplicas)
			assert.Equal(t, int32(4), hpa.Spec.MaxReplicas)
			assert.Equal(t, corev1.ResourceCPU, hpa.Spec.Metrics[0].Resource.Name)
			assert.Equal(t, int32(60), *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization)
			assert.Len(t, hpa.OwnerReferences, 1)
		})
	}
}
