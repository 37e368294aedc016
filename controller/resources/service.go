package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kfn-dev/kfn/runtimes/plan"
)

// ServicePort is the port of a Function's Service; it forwards to plan.Port.
const ServicePort int32 = 80

// Service builds the Function's Service: named after the Function (so
// http://<name>.<namespace>.svc.cluster.local reaches it), port 80 to the
// host's port, selecting the Function's pods.
func Service(p plan.Plan) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(p.Name, p.Namespace).
		WithLabels(ObjectLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(p.Selector).
			WithPorts(corev1ac.ServicePort().
				WithName("http").
				WithProtocol(corev1.ProtocolTCP).
				WithPort(ServicePort).
				WithTargetPort(intstr.FromInt32(p.Port))))
}
