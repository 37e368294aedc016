package plan

import (
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// Scaling is a Function's replica range.
type Scaling struct {
	// Autoscaled is true when an autoscaler owns the replica count
	// (spec.scaleConfig set); Replicas is then not applied.
	Autoscaled bool
	// Replicas is spec.replicas (default 1) for a Function that is not
	// autoscaled.
	Replicas int32
	// MinReplicas and MaxReplicas bound an autoscaled Function; both equal
	// Replicas otherwise.
	MinReplicas int32
	MaxReplicas int32
	// TargetBacklog, TargetConcurrency and CooldownPeriod (seconds) are the
	// queue-depth scaling knobs, defaults written out.
	TargetBacklog     int32
	TargetConcurrency int32
	CooldownPeriod    int32
}

// ScalesToZero reports whether the Function may run no replica at all.
func (s Scaling) ScalesToZero() bool { return s.Autoscaled && s.MinReplicas == 0 }

// Fixed returns the scaling of the same Function with scaleConfig left
// out: exactly Replicas, as Kyma runs every Function. The controller uses
// it when an autoscaler someone else made scales the Function through
// spec.replicas.
func (s Scaling) Fixed() Scaling {
	s.Autoscaled = false
	s.MinReplicas, s.MaxReplicas = s.Replicas, s.Replicas
	return s
}

// scaling reads fn's replica range, defaults written out.
func scaling(fn *v1alpha2.Function) Scaling {
	return Scaling{
		Autoscaled:        fn.Autoscaled(),
		Replicas:          fn.Replicas(),
		MinReplicas:       fn.MinReplicas(),
		MaxReplicas:       fn.MaxReplicas(),
		TargetBacklog:     fn.TargetBacklog(),
		TargetConcurrency: fn.TargetConcurrency(),
		CooldownPeriod:    fn.CooldownPeriod(),
	}
}
