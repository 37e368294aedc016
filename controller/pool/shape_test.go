package pool_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/api/plan"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/pool"
)

// planOf is the plan of a Node.js Function of ns that scales to zero, with
// memory limit mem (each limit is a shape of its own).
func planOf(t *testing.T, ns, name, mem string) plan.Plan {
	t.Helper()
	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha2.FunctionSpec{
			Runtime:     "nodejs22",
			Source:      v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'ok' }"}},
			ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)},
			ResourceConfiguration: &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}},
			}},
		},
	}
	p, err := plan.For(fn, function.DefaultConfig().Plan)
	require.NoError(t, err)
	require.NoError(t, p.SetAutoscaler(true, true))
	return p
}

// TestANamespaceHasAtMostMaxShapesPooled: a tenant whose Functions differ
// in resources makes one shape per Function; past MaxShapes in its
// namespace they wake on a new pod (and say why), while Functions of a
// shape already pooled, and other namespaces, are served. Fails when the
// bound is dropped.
func TestANamespaceHasAtMostMaxShapesPooled(t *testing.T) {
	p, err := pool.New(nil, nil, pool.Config{Size: 1, Resources: function.DefaultConfig().Resources})
	require.NoError(t, err)
	for i := range pool.MaxShapes {
		require.NoError(t, p.Observe(planOf(t, "greedy", fmt.Sprintf("f%d", i), fmt.Sprintf("%dMi", 200+i))), "shape %d", i)
	}
	err = p.Observe(planOf(t, "greedy", "one-too-many", "300Mi"))
	require.ErrorIs(t, err, pool.ErrNotPoolable)
	assert.ErrorContains(t, err, "other shapes already")
	assert.NoError(t, p.Observe(planOf(t, "greedy", "same-shape", "200Mi")), "a shape already pooled")
	require.NoError(t, p.Observe(planOf(t, "greedy", "f7", "200Mi")), "f7 takes a shape already pooled: its own is gone")
	assert.NoError(t, p.Observe(planOf(t, "greedy", "one-too-many", "300Mi")), "room again")
	assert.NoError(t, p.Observe(planOf(t, "other", "f", "300Mi")), "another namespace")
}
