package function

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/plan"
)

// ErrNeedsKEDA is returned by ChooseAutoscaler for a Function that asks to
// scale to zero in a cluster without KEDA.
var ErrNeedsKEDA = errors.New("scaleConfig.minReplicas 0 (scale to zero) needs KEDA, whose CRDs are not installed in this cluster: install KEDA or set minReplicas to 1 or more")

// Autoscaler is what owns a Function's replica count.
type Autoscaler string

// The autoscalers.
const (
	// AutoscalerNone: the controller sets the Deployment's replicas.
	AutoscalerNone Autoscaler = "None"
	// AutoscalerHPA: a CPU HorizontalPodAutoscaler.
	AutoscalerHPA Autoscaler = "HorizontalPodAutoscaler"
	// AutoscalerKEDA: a KEDA ScaledObject on kfn's scaler.
	AutoscalerKEDA Autoscaler = "ScaledObject"
)

// ChooseAutoscaler decides who owns a Function's replicas:
//   - no scaleConfig: nobody; spec.replicas is applied (an autoscaler of
//     the user's that targets the Function sets it, as in Kyma; the
//     reconciler then passes Scaling.Fixed());
//   - minReplicas 0: KEDA, or ErrNeedsKEDA when KEDA is not installed;
//   - maxReplicas > minReplicas >= 1: KEDA when installed and a
//     Subscription's sink is the Function (scaling on queue depth), else
//     a CPU HorizontalPodAutoscaler;
//   - maxReplicas == minReplicas: nobody; minReplicas is applied.
func ChooseAutoscaler(s plan.Scaling, kedaInstalled, subscribed bool) (Autoscaler, error) {
	switch {
	case !s.Autoscaled:
		return AutoscalerNone, nil
	case s.MinReplicas == 0:
		if !kedaInstalled {
			return AutoscalerNone, ErrNeedsKEDA
		}
		return AutoscalerKEDA, nil
	case s.MaxReplicas <= s.MinReplicas:
		return AutoscalerNone, nil
	case kedaInstalled && subscribed:
		return AutoscalerKEDA, nil
	default:
		return AutoscalerHPA, nil
	}
}

// FixedReplicas is the replica count the controller applies when no
// autoscaler owns it.
func FixedReplicas(s plan.Scaling) int32 {
	if s.Autoscaled {
		return s.MinReplicas
	}
	return s.Replicas
}

// TargetsFunction reports whether the scale target of an autoscaler (an
// HPA's or a KEDA ScaledObject's scaleTargetRef) is a Function, of any
// version: such an autoscaler scales the Function through its scale
// subresource, that is, it sets spec.replicas.
func TargetsFunction(apiVersion, kind string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && kind == "Function" && gv.Group == v1alpha2.GroupVersion.Group
}
