package runtimes_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

func TestWriteHostConcurrentAndIdempotent(t *testing.T) {
	root := t.TempDir()
	const writers = 8
	dirs := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			d, err := runtimes.WriteHost(root)
			assert.NoError(t, err)
			dirs[i] = d
		})
	}
	wg.Wait()
	for _, d := range dirs {
		assert.Equal(t, filepath.Join(root, runtimes.HostVersion()), d)
	}

	// Every embedded file is on disk with the same content.
	err := fs.WalkDir(runtimes.HostFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, err := fs.ReadFile(runtimes.HostFS(), p)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dirs[0], filepath.FromSlash(p)))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), p)
		return nil
	})
	require.NoError(t, err)

	// Only the version directory is left: no temporary directories.
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, entries, 1)

	// A second call reuses the directory.
	d, err := runtimes.WriteHost(root)
	require.NoError(t, err)
	assert.Equal(t, dirs[0], d)
}

func TestHostFilesEmbedded(t *testing.T) {
	for _, p := range []string{
		"nodejs/server.cjs", "nodejs/deps-hooks.mjs", "nodejs/sdk.cjs", "nodejs/modules/sdk/index.cjs", "nodejs/modules/sdk/package.json",
		"python/kfn_main.py", "python/kfnhost/server.py", "python/kfnhost/requestapi.py", "python/api/sdk.py",
	} {
		_, err := fs.Stat(runtimes.HostFS(), p)
		assert.NoError(t, err, p)
	}
	assert.Len(t, runtimes.HostVersion(), 16)
}
