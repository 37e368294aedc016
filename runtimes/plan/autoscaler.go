package plan

import "errors"

// ErrNeedsKEDA is returned by ChooseAutoscaler (and Plan.SetAutoscaler) for
// a Function that asks to scale to zero in a cluster without KEDA.
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
func ChooseAutoscaler(s Scaling, kedaInstalled, subscribed bool) (Autoscaler, error) {
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
func (s Scaling) FixedReplicas() int32 {
	if s.Autoscaled {
		return s.MinReplicas
	}
	return s.Replicas
}

// SetAutoscaler records in p.Autoscaler who owns the replica count, as
// ChooseAutoscaler decides it from p.Scaling and what the cluster offers.
// On error (ErrNeedsKEDA) p is left as it was.
func (p *Plan) SetAutoscaler(kedaInstalled, subscribed bool) error {
	a, err := ChooseAutoscaler(p.Scaling, kedaInstalled, subscribed)
	if err != nil {
		return err
	}
	p.Autoscaler = a
	return nil
}

// DeploymentReplicas returns the Deployment's spec.replicas and true when
// the controller sets it (p.Autoscaler is AutoscalerNone); false when an
// autoscaler owns it, or none was chosen yet (SetAutoscaler), so that the
// field is left to its owner.
func (p Plan) DeploymentReplicas() (int32, bool) {
	if p.Autoscaler != AutoscalerNone {
		return 0, false
	}
	return p.Scaling.FixedReplicas(), true
}
