package crds_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"

	"github.com/kfn-dev/kfn/api/crds"
)

// TestCRDsPassAPIServerValidation runs the API server's own CRD validation,
// including its CEL cost estimates, on the embedded CRDs. It fails fast,
// without an API server, when a marker produces a CRD a cluster would refuse.
func TestCRDsPassAPIServerValidation(t *testing.T) {
	crds, err := crds.All()
	require.NoError(t, err)
	require.Len(t, crds, 2)
	for _, crd := range crds {
		t.Run(crd.Name, func(t *testing.T) {
			apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
			internal := &apiextensions.CustomResourceDefinition{}
			require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil))
			errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal)
			require.Empty(t, errs, "the API server would refuse this CRD")
		})
	}
}
