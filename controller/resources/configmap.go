package resources

import (
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kfn-dev/kfn/runtimes/plan"
)

// ConfigMap builds the ConfigMap that holds an inline Function's source
// files (handler and dependency file), named after the Function and
// annotated with the source hash. Only the source and dependencies are in
// it, so a change of anything else leaves it as it is. It returns nil for a
// Git Function, whose files are fetched into the pod.
func ConfigMap(p plan.Plan) *corev1ac.ConfigMapApplyConfiguration {
	if p.Source.Git != nil {
		return nil
	}
	return corev1ac.ConfigMap(p.Name, p.Namespace).
		WithLabels(ObjectLabels(p)).
		WithAnnotations(map[string]string{AnnotationSourceHash: p.Source.Hash}).
		WithOwnerReferences(ownerReference(p)).
		WithData(p.Source.Files)
}
