package runtimes_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/depcachetest"
	"github.com/kfn-dev/kfn/test/testenv"
)

// measure runs argv under a small python3 that prints, last, the most
// memory argv's process held (its maximum resident set size, in KiB), and
// exits with its code. (The test's own process cannot read it: a child Go
// starts shares its memory until exec, and Linux counts that in.)
const measure = `import resource, subprocess, sys
code = subprocess.call(sys.argv[1:])
sys.stdout.flush()
print("maxrss-kib", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)`

// runClientMeasured is runClient that also returns the most memory the
// client's process held, in bytes.
func runClientMeasured(t *testing.T, rt runtimes.Runtime, command, dir string, env ...string) (int, string, int64) {
	t.Helper()
	argv := rt.DependencyCacheCommand(hostDir)
	cmd := exec.Command(testenv.LookPath(t, "python3"), "-c", measure,
		interpreter(t, rt), argv[1], command, "--runtime="+rt.Name, "--hash="+depsHash, "--dir="+dir)
	cmd.Env = append(append(processEnv(nil, nil), runtimes.EnvDependencyCacheRetryMS+"=10"), env...)
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, string(b))
	}
	out, kib, ok := strings.Cut(string(b), "maxrss-kib ")
	require.True(t, ok, string(b))
	n, err := strconv.ParseInt(strings.TrimSpace(kib), 10, 64)
	require.NoError(t, err)
	return cmd.ProcessState.ExitCode(), out, n << 10
}

// names are the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// rawTarball gzips a tar stream written by write.
func rawTarball(t *testing.T, write func(tw *tar.Writer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	tw := tar.NewWriter(gz)
	write(tw)
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// gzipBomb is a tarball of one file of size zero bytes: about a thousandth
// of that compressed.
func gzipBomb(t *testing.T, size int64) []byte {
	return rawTarball(t, func(tw *tar.Writer) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "node_modules/zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}))
		zeros := make([]byte, 1<<20)
		for left := size; left > 0; left -= int64(len(zeros)) {
			_, err := tw.Write(zeros[:min(left, int64(len(zeros)))])
			require.NoError(t, err)
		}
	})
}

// hugePAXHeader is a tarball whose first entry has a pax extended header
// of about size bytes of small records (which cost Python's tarfile 560 MiB
// for 200 KB), then a file.
func hugePAXHeader(t *testing.T, size int) []byte {
	return rawTarball(t, func(tw *tar.Writer) {
		records := map[string]string{}
		for i := 0; len(records)*len("12 k000000=v\n") < size; i++ {
			records[fmt.Sprintf("k%06d", i)] = "v"
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1, PAXRecords: records, Format: tar.FormatPAX}))
		_, err := tw.Write([]byte("x"))
		require.NoError(t, err)
	})
}

// manyEntries is a tarball of n entries, each the same directory (cheap to
// unpack: the entries are what is counted).
func manyEntries(t *testing.T, n int) []byte {
	return rawTarball(t, func(tw *tar.Writer) {
		for range n {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755}))
		}
	})
}

// TestDependencyCacheClientBoundsWhatItUnpacks: what the cache serves is as
// untrusted as what a tenant stores, so each runtime's client (real node and
// python3) bounds what it unpacks: the bytes the gzip stream expands to
// (KFN_DEPENDENCY_MAX_BYTES; a gzip bomb expands 1,000 times), the number of
// entries (200,000), an extended header's size (16 KiB) and a name's length
// (4,096 bytes); each refused with a clear error, the directory left empty
// and the process's memory bounded. Fails when one is unpacked, refused only
// by the file system, or costs the memory it asks for.
func TestDependencyCacheClientBoundsWhatItUnpacks(t *testing.T) {
	const maxBytes = 16 << 20
	bomb := gzipBomb(t, 256<<20)
	require.Less(t, len(bomb), 1<<20, "a thousandth of what it expands to, about")
	archives := map[string]struct {
		body     []byte
		reason   string
		maxBytes int
	}{
		"a gzip bomb":       {body: bomb, reason: fmt.Sprintf("more than %d bytes", maxBytes)},
		"a huge pax header": {body: hugePAXHeader(t, 200<<10), reason: "extended header"},
		// 200,001 headers of 512 bytes: 98 MiB unpacked.
		"many entries":           {body: manyEntries(t, 200_001), reason: "more than 200000 entries", maxBytes: 128 << 20},
		"a name too long":        {body: tarball(t, tarFile(strings.Repeat("d/", 2100)+"f")), reason: "longer than 4096 bytes"},
		"a link target too long": {body: tarball(t, tarLink("l", strings.Repeat("d/", 2100)+"f")), reason: "longer than 4096 bytes"},
	}
	for _, name := range []string{"nodejs22", "python312"} {
		rt := lookup(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cache := depcachetest.Start(t)
			env := []string{runtimes.EnvDependencyCache + "=" + cache.Base(), runtimes.EnvIdentityTokenFile + "=" + tokenFile(t, depcachetest.Token)}
			// What the interpreter holds for a fetch of a small set.
			cache.Put(rt.Name, depsHash, tarball(t, tarDir("node_modules/"), tarFile("node_modules/a")))
			code, out, baseline := runClientMeasured(t, rt, "fetch", t.TempDir(), env...)
			require.Equal(t, 0, code, out)
			for what, a := range archives {
				cache.Put(rt.Name, depsHash, a.body)
				root := t.TempDir()
				deps := filepath.Join(root, "deps")
				require.NoError(t, os.Mkdir(deps, 0o755))
				limit := maxBytes
				if a.maxBytes != 0 {
					limit = a.maxBytes
				}
				code, out, rss := runClientMeasured(t, rt, "fetch", deps, append(env, runtimes.EnvDependencyMaxBytes+"="+fmt.Sprint(limit))...)
				assert.Equal(t, 1, code, "%s: %s", what, out)
				assert.Contains(t, out, a.reason, what)
				assert.Empty(t, names(t, deps), "%s: the directory is left empty", what)
				assert.Equal(t, []string{"deps"}, names(t, root), "%s: nothing beside it", what)
				t.Logf("%s: exit %d, %d MiB held (a small fetch: %d MiB)", what, code, rss>>20, baseline>>20)
				assert.Less(t, rss, baseline+64<<20, "%s: at most 64 MiB more than a small fetch (%d MiB)", what, baseline>>20)
			}
			// Within the bounds, the same shapes are unpacked.
			env = append(env, runtimes.EnvDependencyMaxBytes+"="+fmt.Sprint(maxBytes))
			cache.Put(rt.Name, depsHash, gzipBomb(t, maxBytes/2))
			code, out = runClient(t, rt, "fetch", t.TempDir(), env...)
			assert.Equal(t, 0, code, "half the bound: %s", out)
			cache.Put(rt.Name, depsHash, tarball(t, tarFile(strings.Repeat("d/", 1000)+"f")))
			code, out = runClient(t, rt, "fetch", t.TempDir(), env...)
			assert.Equal(t, 0, code, "a name of 2,001 bytes: %s", out)
		})
	}
}
