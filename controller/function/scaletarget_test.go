package function

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTargetsFunction(t *testing.T) {
	type target struct{ apiVersion, kind string }
	tests := map[string]struct {
		target
		want bool
	}{
		"kubectl autoscale function": {target{"serverless.kyma-project.io/v1alpha2", "Function"}, true},
		"another version":            {target{"serverless.kyma-project.io/v1alpha1", "Function"}, true},
		"kfn's own HPA":              {target{"apps/v1", "Deployment"}, false},
		"another group's Function":   {target{"example.com/v1", "Function"}, false},
		"another kind of the group":  {target{"serverless.kyma-project.io/v1alpha2", "GitRepository"}, false},
		"KEDA's default target":      {target{"", ""}, false},
		"bad apiVersion":             {target{"a/b/c", "Function"}, false},
	}
	for name, tc := range tests {
		assert.Equal(t, tc.want, TargetsFunction(tc.apiVersion, tc.kind), name)
	}
}
