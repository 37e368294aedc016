package v2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the APIRule API.
	GroupVersion = schema.GroupVersion{Group: "gateway.kyma-project.io", Version: "v2"}

	// SchemeBuilder registers the APIRule types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the APIRule types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
