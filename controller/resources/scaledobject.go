package resources

import (
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/contract/trigger"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// ScaledObjectGVK is KEDA's ScaledObject kind.
var ScaledObjectGVK = kedav1alpha1.SchemeGroupVersion.WithKind("ScaledObject")

// ScaledObject builds the KEDA ScaledObject that scales the Function's
// Deployment between scaleConfig's minReplicas (0 allowed) and maxReplicas
// on kfn's scaler at cfg.ScalerAddress, with the Function's cooldown. Its
// one trigger is package trigger's contract with the scaler;
// cfg.ScalerAuthentication, when not nil, is the trigger's
// authenticationRef (the scaler's TLS settings for KEDA), copied. It is
// KEDA's own Go type.
func ScaledObject(p plan.Plan, cfg Config) *kedav1alpha1.ScaledObject {
	s := p.Scaling
	return &kedav1alpha1.ScaledObject{
		TypeMeta: metav1.TypeMeta{APIVersion: ScaledObjectGVK.GroupVersion().String(), Kind: ScaledObjectGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.Name,
			Namespace: p.Namespace,
			Labels:    ObjectLabels(p),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: p.Name, UID: p.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: kedav1alpha1.ScaledObjectSpec{
			ScaleTargetRef:  &kedav1alpha1.ScaleTarget{APIVersion: "apps/v1", Kind: "Deployment", Name: p.Name},
			MinReplicaCount: ptr.To(s.MinReplicas),
			MaxReplicaCount: ptr.To(s.MaxReplicas),
			CooldownPeriod:  ptr.To(s.CooldownPeriod),
			Triggers: []kedav1alpha1.ScaleTriggers{{
				Type:              trigger.Type,
				AuthenticationRef: cfg.ScalerAuthentication.DeepCopy(),
				Metadata: trigger.Metadata{
					ScalerAddress:     cfg.ScalerAddress,
					Function:          types.NamespacedName{Namespace: p.Namespace, Name: p.Name},
					TargetBacklog:     s.TargetBacklog,
					TargetConcurrency: s.TargetConcurrency,
				}.Render(),
			}},
		},
	}
}
