package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
)

func TestService(t *testing.T) {
	fn := fntest.Function("hello", "ns")
	svc := typed[corev1.Service](t, resources.Service(planFor(t, fn)))
	assert.Equal(t, "hello", svc.Name)
	assert.Equal(t, fn.SelectorLabels(), svc.Spec.Selector)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(80), svc.Spec.Ports[0].Port)
	assert.Equal(t, int32(8080), svc.Spec.Ports[0].TargetPort.IntVal)
	assert.Len(t, svc.OwnerReferences, 1)
}
