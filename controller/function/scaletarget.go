package function

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// TargetsFunction reports whether the scale target of an autoscaler (an
// HPA's or a KEDA ScaledObject's scaleTargetRef) is a Function, of any
// version: such an autoscaler scales the Function through its scale
// subresource, that is, it sets spec.replicas.
func TargetsFunction(apiVersion, kind string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && kind == "Function" && gv.Group == v1alpha2.GroupVersion.Group
}
