package v1alpha2

import (
	"fmt"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxSourceBytes is the most source and dependencies a Function may hold
// together: they are stored in one ConfigMap, whose data is limited to 1 MiB.
const MaxSourceBytes = 1024*1024 - 4096

// Validate checks the rules of a Function that the CRD cannot afford to
// check with CEL: label values and annotations as Kubernetes checks them on
// a pod, and the combined size of source and dependencies. The API server
// has already applied the rest. The returned errors carry field paths and
// say what to fix; the controller reports them as ConfigurationReady False
// with reason InvalidFunctionSpec.
func (f *Function) Validate() field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(f.Spec.Labels, spec.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(f.Spec.Annotations, spec.Child("annotations"))...)
	if in := f.Spec.Source.Inline; in != nil {
		if n := len(in.Source) + len(in.Dependencies); n > MaxSourceBytes {
			errs = append(errs, field.TooLong(spec.Child("source", "inline"), fmt.Sprintf("%d bytes of source and dependencies", n), MaxSourceBytes))
		}
	}
	return errs
}
