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

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/controller/pool"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
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

// TestFunctionsWithDependenciesArePooled: with a dependency cache, a
// Function with inline dependencies is served by the pool, from the same
// standby pods as one without (the shape leaves the dependencies out), and
// its specialization names them in the cache (runtime and hash) with the
// cache and the directory to unpack them into, and without the start-only
// library path; without a cache it wakes on a new pod and says why, and a
// Git source still does. Fails when dependencies split the shape or are
// not named.
func TestFunctionsWithDependenciesArePooled(t *testing.T) {
	const cache = "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"
	cfg := function.DefaultConfig().Plan
	cfg.DependencyCacheAddress = cache
	fn := func(name, deps string) *v1alpha2.Function {
		return &v1alpha2.Function{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1alpha2.FunctionSpec{
				Runtime:     "nodejs22",
				Source:      v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'ok' }", Dependencies: deps}},
				ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)},
			},
		}
	}
	planned := func(f *v1alpha2.Function, cfg plan.Config) plan.Plan {
		p, err := plan.For(f, cfg)
		require.NoError(t, err)
		require.NoError(t, p.SetAutoscaler(true, true))
		return p
	}
	withDeps := planned(fn("orders", `{"dependencies": {"left-pad": "1.3.0"}}`), cfg)
	plain := planned(fn("refunds", ""), cfg)
	require.NoError(t, pool.Eligible(withDeps))
	res := function.DefaultConfig().Resources
	assert.Equal(t, pool.Shape(plain, res), pool.Shape(withDeps, res), "Functions with and without dependencies share standby pods")

	s := pool.Specialization(withDeps)
	require.NotNil(t, s.Dependencies)
	assert.Equal(t, runtimes.SpecializationDependencies{Runtime: "nodejs22", Hash: withDeps.Dependencies.Hash}, *s.Dependencies)
	assert.Equal(t, cache, s.Env[runtimes.EnvDependencyCache])
	assert.Equal(t, runtimes.PodDepsDir, s.Env[runtimes.EnvDepsDir], "unpacked into the standby pod's dependencies volume")
	assert.NotContains(t, s.Env, runtimes.EnvNodePath, "the host adds the Function's node_modules to its own")
	assert.Contains(t, s.Files, "package.json")
	assert.Nil(t, pool.Specialization(plain).Dependencies)

	// A Python Function's plan sets PYTHONPATH to its dependencies: its
	// own, not a user's start-only variable.
	py := func(name, requirements string) *v1alpha2.Function {
		f := fn(name, "")
		f.Spec.Runtime = "python312"
		f.Spec.Source.Inline = &v1alpha2.InlineSource{Source: "def main(event, context):\n    return 'ok'\n", Dependencies: requirements}
		return f
	}
	pyDeps := planned(py("invoices", "requests==2.32.3\n"), cfg)
	require.NoError(t, pool.Eligible(pyDeps), "a Python Function with dependencies")
	assert.Equal(t, pool.Shape(planned(py("receipts", ""), cfg), res), pool.Shape(pyDeps, res), "Python Functions with and without dependencies share standby pods")
	assert.NotContains(t, pool.Specialization(pyDeps).Env, runtimes.EnvPythonPath, "the host adds the Function's packages to its own path")
	userPath := py("paths", "")
	userPath.Spec.Env = []v1alpha2.EnvVar{{Name: "PYTHONPATH", Value: "/opt/mine"}}
	err := pool.Eligible(planned(userPath, cfg))
	require.ErrorIs(t, err, pool.ErrNotPoolable, "a PYTHONPATH of the user's own")
	assert.ErrorContains(t, err, "PYTHONPATH is read only when a host starts")

	err = pool.Eligible(planned(fn("orders", `{"dependencies": {"left-pad": "1.3.0"}}`), function.DefaultConfig().Plan))
	require.ErrorIs(t, err, pool.ErrNotPoolable)
	assert.ErrorContains(t, err, "no dependency cache")
	git := fn("git", "")
	git.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{URL: "https://git.test/r.git", Repository: v1alpha2.Repository{Reference: "main"}}}
	git.Status.GitRepository = &v1alpha2.GitRepositoryStatus{URL: "https://git.test/r.git", Repository: v1alpha2.Repository{Reference: "main"}, Commit: "c0ffee"}
	err = pool.Eligible(planned(git, cfg))
	require.ErrorIs(t, err, pool.ErrNotPoolable)
	assert.ErrorContains(t, err, "fetched from Git")
}
