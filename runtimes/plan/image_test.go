package plan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/fntest"
)

func TestImageAllowed(t *testing.T) {
	registries := []string{"ghcr.io/kfn-dev", "registry.example.com:5000", "kfn", "localhost/mirror/"}
	tests := map[string]struct {
		image string
		ok    bool
	}{
		"under a registry path":              {"ghcr.io/kfn-dev/runtime-nodejs24:1.0", true},
		"deeper under a registry path":       {"ghcr.io/kfn-dev/team/fn@sha256:" + sha, true},
		"a registry host":                    {"registry.example.com:5000/any/thing:2", true},
		"Docker Hub path, as written":        {"kfn/runtime-nodejs22:latest", true},
		"Docker Hub path, normalized":        {"docker.io/kfn/runtime-nodejs22", true},
		"Docker Hub path, index host":        {"index.docker.io/kfn/x", true},
		"localhost path, trailing slash":     {"localhost/mirror/x", true},
		"path segment is no prefix":          {"ghcr.io/kfn-dev-fork/x:1", false},
		"registry host is no prefix":         {"ghcr.io.example.com/kfn-dev/x", false},
		"same host, other port":              {"registry.example.com/any:1", false},
		"another registry":                   {"quay.io/kfn-dev/x", false},
		"Docker Hub library image":           {"busybox", false},
		"Docker Hub user named like a path":  {"kfnx/x", false},
		"the registry path itself, no image": {"ghcr.io/kfn-dev", true},
		"no image reference":                 {"UPPER/Case::x", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := plan.ImageAllowed(tc.image, registries)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, plan.ErrImageNotAllowed)
		})
	}
	require.NoError(t, plan.ImageAllowed("anything.example/x:1", nil), "no list allows every image")
	require.NoError(t, plan.ImageAllowed("anything.example/x:1", []string{"*"}), "* allows every image")
	err := plan.ImageAllowed("quay.io/x/y:1", []string{"ghcr.io/kfn-dev", "kfn"})
	require.ErrorContains(t, err, "quay.io/x/y:1 is not from a registry this installation allows (ghcr.io/kfn-dev, kfn)")
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestRegistriesOf(t *testing.T) {
	assert.Equal(t, []string{"docker.io/kfn", "ghcr.io/kfn-dev", "registry.example.com:5000/platform/kfn"}, plan.RegistriesOf(map[string]string{
		"nodejs22":  "kfn/runtime-nodejs22:latest",
		"nodejs24":  "ghcr.io/kfn-dev/runtime-nodejs24:1.0",
		"python312": "ghcr.io/kfn-dev/runtime-python312@sha256:" + sha,
		"python314": "registry.example.com:5000/platform/kfn/runtime-python314",
		"broken":    "Not An Image",
	}))
	assert.Equal(t, []string{"docker.io/library"}, plan.RegistriesOf(map[string]string{"x": "busybox"}))
}

// TestForRefusesImagesFromOtherRegistries checks that a
// runtimeImageOverride from a registry the configuration does not allow is
// refused with what to do, and that the configured runtime images are not
// checked (they are the platform's).
func TestForRefusesImagesFromOtherRegistries(t *testing.T) {
	c := cfg
	c.ImageRegistries = []string{"ghcr.io/kfn-dev"}
	_, err := plan.For(fntest.Function("f", "ns", fntest.ImageOverride("evil.example/miner:1")), c)
	require.ErrorIs(t, err, plan.ErrInvalidFunction)
	require.ErrorIs(t, err, plan.ErrImageNotAllowed)
	assert.ErrorContains(t, err, "spec.runtimeImageOverride: image not allowed: evil.example/miner:1 is not from a registry this installation allows (ghcr.io/kfn-dev)")

	p, err := plan.For(fntest.Function("f", "ns", fntest.ImageOverride("ghcr.io/kfn-dev/custom:1")), c)
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/kfn-dev/custom:1", p.Image)
	p, err = plan.For(fntest.Function("f", "ns"), c)
	require.NoError(t, err, "the configured image (docker.io/kfn) is not checked")
	assert.Equal(t, "kfn/runtime-nodejs22", p.Image)
}

// TestForServiceAccountToken checks who asks for a ServiceAccount token:
// only the annotation set to "true"; another value asks for nothing and
// says so.
func TestForServiceAccountToken(t *testing.T) {
	tests := map[string]struct {
		mods  []fntest.Modifier
		token bool
		note  string
	}{
		"no annotation":       {},
		"true":                {mods: []fntest.Modifier{fntest.Annotate("serverless.kfn.dev/service-account-token", "true")}, token: true},
		"false":               {mods: []fntest.Modifier{fntest.Annotate("serverless.kfn.dev/service-account-token", "false")}},
		"another value":       {mods: []fntest.Modifier{fntest.Annotate("serverless.kfn.dev/service-account-token", "yes")}, note: `annotation serverless.kfn.dev/service-account-token: "yes" is neither "true" nor "false": the pods get no ServiceAccount token`},
		"as a pod annotation": {mods: []fntest.Modifier{fntest.Annotations(map[string]string{"serverless.kfn.dev/service-account-token": "true"})}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := plan.For(fntest.Function("f", "ns", tc.mods...), cfg)
			require.NoError(t, err)
			assert.Equal(t, tc.token, p.ServiceAccountToken)
			if tc.note == "" {
				assert.Empty(t, p.Notes)
			} else {
				assert.Equal(t, []string{tc.note}, p.Notes)
			}
		})
	}
}
