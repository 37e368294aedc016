package crds_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"

	"github.com/kfn-dev/kfn/api/crds"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// TestCRDsPassAPIServerValidation runs the API server's own CRD validation,
// including its CEL cost estimates, on the embedded CRDs. It fails fast,
// without an API server, when a marker produces a CRD a cluster would refuse.
func TestCRDsPassAPIServerValidation(t *testing.T) {
	crds, err := crds.All()
	require.NoError(t, err)
	require.Len(t, crds, 3)
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

// TestFunctionCRDHoldsTheCaps checks that the Function CRD's maximums are
// the caps package v1alpha2 names, so that the constants the code and the
// documentation use are the bounds the API server applies.
func TestFunctionCRDHoldsTheCaps(t *testing.T) {
	all, err := crds.All()
	require.NoError(t, err)
	var spec apiextensionsv1.JSONSchemaProps
	for _, crd := range all {
		if crd.Spec.Names.Kind == "Function" {
			spec = crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		}
	}
	scale := spec.Properties["scaleConfig"]
	for name, tc := range map[string]struct {
		prop apiextensionsv1.JSONSchemaProps
		want float64
	}{
		"replicas":          {spec.Properties["replicas"], serverlessv1alpha2.MaxReplicas},
		"minReplicas":       {scale.Properties["minReplicas"], serverlessv1alpha2.MaxReplicas},
		"maxReplicas":       {scale.Properties["maxReplicas"], serverlessv1alpha2.MaxReplicas},
		"targetBacklog":     {scale.Properties["targetBacklog"], serverlessv1alpha2.MaxTargetBacklog},
		"targetConcurrency": {scale.Properties["targetConcurrency"], serverlessv1alpha2.MaxTargetConcurrency},
		"cooldownPeriod":    {scale.Properties["cooldownPeriod"], serverlessv1alpha2.MaxCooldownPeriod},
	} {
		require.NotNil(t, tc.prop.Maximum, "%s has a maximum", name)
		assert.Equal(t, tc.want, *tc.prop.Maximum, name)
	}
}
