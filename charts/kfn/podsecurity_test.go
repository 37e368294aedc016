package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodSecurityRestricted evaluates every pod template of every value set
// with the Pod Security Admission library's checks at the restricted level
// of the latest version, as a namespace labelled
// pod-security.kubernetes.io/enforce=restricted would.
func TestPodSecurityRestricted(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	level := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := typed(t, render(t, vs.values))
			templates := r.podTemplates()
			require.NotEmpty(t, templates)
			for name, pt := range templates {
				res := policy.AggregateCheckResults(evaluator.EvaluatePod(level, &pt.ObjectMeta, &pt.Spec))
				assert.True(t, res.Allowed, "%s violates restricted: %s: %s", name, res.ForbiddenReason(), res.ForbiddenDetail())
				for _, c := range pt.Spec.Containers {
					sc := c.SecurityContext
					require.NotNil(t, sc, name)
					assert.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s/%s: read-only root filesystem", name, c.Name)
				}
			}
		})
	}
}

// TestPodSecurityOverrideRefused shows that a security context override that
// would break the restricted profile is refused by the schema, and that the
// evaluator catches what the schema lets through (an added capability).
func TestPodSecurityOverrideRefused(t *testing.T) {
	_, err := renderManifest(t, map[string]any{"containerSecurityContext": map[string]any{"allowPrivilegeEscalation": true}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "allowPrivilegeEscalation")

	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	r := typed(t, render(t, map[string]any{"containerSecurityContext": map[string]any{"capabilities": map[string]any{"add": []any{"NET_ADMIN"}}}}))
	pt := r.podTemplates()["kfn-controller"]
	res := policy.AggregateCheckResults(evaluator.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &pt.ObjectMeta, &pt.Spec))
	assert.False(t, res.Allowed, "an added capability must fail the restricted check")
}
