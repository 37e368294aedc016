package chart_test

import (
	"slices"
	"strings"
	"testing"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/fntest"
	"github.com/kfn-dev/kfn/test/gittest"
)

// TestFunctionPodSettingsReachTheController renders the chart and loads
// the controller's config file as the controller does: the registries a
// runtimeImageOverride may name (by default the chart's runtime images',
// whichever registry they come from), the emptyDir limits, and the SSH
// known hosts, whose defaults parse and name github.com, gitlab.com and
// bitbucket.org.
func TestFunctionPodSettingsReachTheController(t *testing.T) {
	def := controllerConfig(t, nil)
	assert.Equal(t, []string{"ghcr.io/kfn-dev"}, def.Function.Plan.ImageRegistries, "the registry of the chart's runtime images")
	_, err := plan.For(fntest.Function("f", "ns", fntest.ImageOverride("docker.io/someone/miner:1")), def.Function.Plan)
	require.ErrorIs(t, err, plan.ErrImageNotAllowed)
	p, err := plan.For(fntest.Function("f", "ns", fntest.ImageOverride("ghcr.io/kfn-dev/runtime-nodejs24:custom")), def.Function.Plan)
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/kfn-dev/runtime-nodejs24:custom", p.Image)
	v := def.Function.Resources.Volumes
	assert.Equal(t, []string{"256Mi", "1Gi", "1Gi"}, []string{v.FunctionDir.String(), v.Dependencies.String(), v.Tmp.String()})
	keyPEM, _ := gittest.NewKey(t)
	for _, host := range []string{"git@github.com:org/repo.git", "ssh://git@gitlab.com/org/repo.git", "git@bitbucket.org:org/repo.git"} {
		auth, err := gitsource.Auth(v1alpha2.RepositoryAuthSSHKey, host, map[string][]byte{
			"ssh-privatekey":                keyPEM,
			gitsource.KeyPlatformKnownHosts: []byte(def.Function.Resources.GitKnownHosts),
		})
		require.NoError(t, err, host)
		assert.ElementsMatch(t, []string{"ssh-ed25519", "ecdsa-sha2-nistp256"}, auth.(*gitssh.PublicKeys).HostKeyAlgorithms, "%s has known keys", host)
	}

	mirrored := controllerConfig(t, map[string]any{
		"runtimes": map[string]any{"registry": "registry.example.com:5000/mirror", "images": map[string]any{"python314": "quay.io/team/py@sha256:" + strings.Repeat("0", 64)}},
	})
	assert.Equal(t, []string{"quay.io/team", "registry.example.com:5000/mirror"}, slices.Sorted(slices.Values(mirrored.Function.Plan.ImageRegistries)))

	set := controllerConfig(t, map[string]any{
		"functions": map[string]any{
			"allowedImageRegistries": []any{"*"},
			"volumeLimits":           map[string]any{"functionDir": "16Mi", "dependencies": "2Gi", "tmp": "512Mi"},
		},
		"git": map[string]any{"knownHosts": "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"},
	})
	assert.Equal(t, []string{"*"}, set.Function.Plan.ImageRegistries)
	v = set.Function.Resources.Volumes
	assert.Equal(t, []string{"16Mi", "2Gi", "512Mi"}, []string{v.FunctionDir.String(), v.Dependencies.String(), v.Tmp.String()})
	assert.Equal(t, "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n", set.Function.Resources.GitKnownHosts)
}
