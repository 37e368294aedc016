package resources_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/fntest"
)

// TestEveryAdmittedFunctionRunsRestricted builds the pod of every Function
// the CRD admits in api/testdata/valid (the security contexts and
// annotations the restricted standard allows among them), also asking for
// a ServiceAccount token and with Git key credentials, and evaluates it
// with the Pod Security Admission library at the restricted level, as a
// namespace labelled pod-security.kubernetes.io/enforce=restricted would:
// what the CRD lets through runs there.
func TestEveryAdmittedFunctionRunsRestricted(t *testing.T) {
	admitter, err := manifest.NewAdmitter()
	require.NoError(t, err)
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	level := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	files, err := filepath.Glob(filepath.Join("..", "..", "api", "testdata", "valid", "*.yaml"))
	require.NoError(t, err)
	pc := planConfig
	pc.Images = map[string]string{}
	for _, rt := range runtimes.All() {
		pc.Images[rt.Name] = "kfn/runtime-" + rt.Name
	}
	cfg := testConfig()
	cfg.GitKnownHosts = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	functions := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		docs, err := manifest.Decode(f, data)
		require.NoError(t, err)
		set := admitter.Load(context.Background(), docs)
		require.Empty(t, set.Invalid)
		for _, fn := range set.Functions {
			functions++
			variants := map[string]*v1alpha2.Function{"as written": fn}
			asks := fn.DeepCopy()
			fntest.Annotate(v1alpha2.AnnotationServiceAccountToken, "true")(asks)
			variants["with a token"] = asks
			if g := fn.Spec.Source.GitRepository; g != nil {
				for _, v := range variants {
					fntest.Resolved("c0ffee")(v)
				}
				key := asks.DeepCopy()
				key.Spec.Source.GitRepository.Auth = &v1alpha2.RepositoryAuth{Type: v1alpha2.RepositoryAuthSSHKey, SecretName: "k"}
				variants["with key credentials"] = key
			}
			for name, v := range variants {
				p, err := plan.For(v, pc)
				require.NoError(t, err)
				require.NoError(t, p.SetAutoscaler(true, false))
				pod := typed[corev1.PodTemplateSpec](t, resources.Deployment(p, cfg).Spec.Template)
				res := policy.AggregateCheckResults(evaluator.EvaluatePod(level, &pod.ObjectMeta, &pod.Spec))
				assert.True(t, res.Allowed, "%s, %s: %s: %s", filepath.Base(f), name, res.ForbiddenReason(), res.ForbiddenDetail())
			}
		}
	}
	require.GreaterOrEqual(t, functions, 8, "the valid Functions were read")
}
