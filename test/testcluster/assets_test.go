package testcluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindAssetsExplainsABadKubebuilderAssets(t *testing.T) {
	tests := map[string]struct {
		files   map[string]os.FileMode
		wantErr string
	}{
		"empty directory": {
			wantErr: "no kube-apiserver binary",
		},
		"etcd missing": {
			files:   map[string]os.FileMode{"kube-apiserver": 0o755},
			wantErr: "no etcd binary",
		},
		"not executable": {
			files:   map[string]os.FileMode{"kube-apiserver": 0o644, "etcd": 0o755},
			wantErr: "kube-apiserver is not an executable file",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, mode := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, mode))
			}
			t.Setenv(assetsEnv, dir)

			_, err := findAssets()
			require.ErrorContains(t, err, tc.wantErr)
			require.ErrorContains(t, err, "run "+assetsScript, "the error says how to fix it")
		})
	}
}

func TestFindAssetsTakesKubebuilderAssets(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"kube-apiserver", "etcd"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o755))
	}
	t.Setenv(assetsEnv, dir)

	got, err := findAssets()
	require.NoError(t, err)
	require.Equal(t, dir, got)
}
