package chart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCRDsAreTheGeneratedOnes holds the chart's crds folder, which Helm
// installs and upgrades, to the CRDs generated into api/crds (which kfn
// dev, offline admission and the tests use): the same files, byte for byte.
func TestCRDsAreTheGeneratedOnes(t *testing.T) {
	generated, err := filepath.Glob("../../api/crds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, generated)
	inChart, err := filepath.Glob("crds/*.yaml")
	require.NoError(t, err)
	names := func(paths []string) (out []string) {
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	require.Equal(t, names(generated), names(inChart), "run make generate")
	for _, g := range generated {
		want, err := os.ReadFile(g)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("crds", filepath.Base(g)))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "charts/kfn/crds/%s differs from api/crds: run make generate", filepath.Base(g))
	}
}
