package resources_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
	"github.com/kfn-dev/kfn/test/depcachetest"
	"github.com/kfn-dev/kfn/test/fntest"
	"github.com/kfn-dev/kfn/test/pkgindex"
	"github.com/kfn-dev/kfn/test/testenv"
)

// TestInstallContainerTakesDependenciesFromTheCache runs the install
// container's own script (the pod's paths moved to temporary directories)
// with the real npm or pip, the runtime image's cache client and a
// stand-in of the dependency cache (the event bridge's handler is tested
// in eventbridge, the two together on the real node). The first pod finds
// nothing in the cache: it installs from the registry (configured through
// the registry config Secret's file, as in a pod) and stores the result;
// the second pod's install takes the same tree from the cache and exits
// without npm or pip: npm and python3 on the PATH log their arguments, and
// the registry sees no request. Fails when a hit still runs the package
// manager (seen: with "exit 0" after the fetch removed, both runtimes
// fail), a miss stores nothing, or the trees differ.
func TestInstallContainerTakesDependenciesFromTheCache(t *testing.T) {
	for _, tc := range []struct {
		runtime string
		fn      func() *v1alpha2.Function
		eco     pkgindex.Ecosystem
		config  func(ix *pkgindex.Index) (name, content string)
		module  string
		manager string // how the script runs the package manager
	}{
		{
			runtime: "nodejs22",
			fn: func() *v1alpha2.Function {
				return fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, `{"dependencies":{"kfn-greet":"1.0.0"}}`))
			},
			eco:     pkgindex.NPM,
			config:  func(ix *pkgindex.Index) (string, string) { return ".npmrc", ix.NPMRC() },
			module:  "node_modules/kfn-greet/index.js",
			manager: "npm install",
		},
		{
			runtime: "python312",
			fn: func() *v1alpha2.Function {
				return fntest.Function("f", "ns", fntest.Runtime(v1alpha2.Python312), fntest.Source("def main(e, c):\n    pass\n", "kfn-greet==1.0.0\n"))
			},
			eco:     pkgindex.PyPI,
			config:  func(ix *pkgindex.Index) (string, string) { return "pip.conf", ix.PipConf() },
			module:  "site-packages/kfn_greet/__init__.py",
			manager: "python3 -m pip install",
		},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			rt, err := runtimes.Lookup(tc.runtime)
			require.NoError(t, err)
			if rt.Language == runtimes.Python {
				python := testenv.LookPath(t, "python3")
				if out, err := exec.Command(python, "-m", "pip", "--version").CombinedOutput(); err != nil {
					testenv.Missing(t, "pip (python3 -m pip)", fmt.Errorf("%w: %s", err, out))
				}
			} else {
				testenv.LookPath(t, "npm")
			}
			index, err := pkgindex.Start("127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = index.Close() })
			asked := func() int { return index.Requests(tc.eco, pkgindex.Package) }
			cache := depcachetest.Start(t)
			hostDir, err := runtimes.WriteHost(t.TempDir())
			require.NoError(t, err)

			cfg := planConfig
			cfg.DependencyCacheAddress = cache.Base()
			fn := tc.fn()
			p, err := plan.For(fn, cfg)
			require.NoError(t, err)
			require.NoError(t, p.SetAutoscaler(true, false))
			pod := typed[appsv1.Deployment](t, resources.Deployment(p, testConfig())).Spec.Template.Spec
			ic := container(pod, resources.ContainerInstallDeps)
			require.NotNil(t, ic)

			source, registryDir, identity := t.TempDir(), t.TempDir(), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(source, rt.DepsFile()), []byte(p.Dependencies.Content), 0o444))
			name, content := tc.config(index)
			require.NoError(t, os.WriteFile(filepath.Join(registryDir, name), []byte(content), 0o444))
			require.NoError(t, os.WriteFile(filepath.Join(identity, "token"), []byte(depcachetest.Token), 0o444))
			writer := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(writer, "token"), []byte(depcachetest.WriterToken(rt.Name, p.Dependencies.Hash)), 0o444))
			// npm and python3 log their arguments before running: a hit
			// must not run the package manager.
			bin, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
			for _, tool := range []string{"npm", "python3"} {
				real, err := exec.LookPath(tool)
				require.NoError(t, err)
				wrapper := fmt.Sprintf("#!/bin/sh\necho \"%s $*\" >> %s\nexec %s \"$@\"\n", tool, calls, real)
				require.NoError(t, os.WriteFile(filepath.Join(bin, tool), []byte(wrapper), 0o755))
			}
			ran := func() string {
				b, _ := os.ReadFile(calls)
				_ = os.Remove(calls)
				return string(b)
			}
			termination := filepath.Join(t.TempDir(), "termination-log")
			message := func() string {
				b, _ := os.ReadFile(termination)
				_ = os.Remove(termination)
				return string(b)
			}
			install := func() (string, string) {
				t.Helper()
				deps, tmp := t.TempDir(), t.TempDir()
				moved := strings.NewReplacer(
					runtimes.PodDepsDir, deps, runtimes.PodSourceDir, source, resources.RegistryConfigDir, registryDir,
					runtimes.ImageHostDir, hostDir, runtimes.PodDependencyWriterDir, writer, runtimes.PodIdentityDir, identity, "/tmp", tmp,
					corev1.TerminationMessagePathDefault, termination,
				)
				cmd := exec.Command(ic.Command[0], ic.Command[1], moved.Replace(ic.Command[2]))
				cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
				for _, e := range ic.Env {
					cmd.Env = append(cmd.Env, e.Name+"="+moved.Replace(e.Value))
				}
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "the install container fails:\n%s", out)
				return deps, string(out)
			}

			first, out := install()
			assert.Contains(t, out, "not in the cache: installing")
			assert.Contains(t, ran(), tc.manager, "the package manager ran")
			assert.FileExists(t, filepath.Join(first, tc.module), "installed from the registry")
			before := asked()
			assert.Positive(t, before, "the package manager ran")
			require.NotEmpty(t, cache.Object(rt.Name, p.Dependencies.Hash), "stored: %s", out)
			assert.Contains(t, out, "stored in the cache")
			cached := runtimes.DependencyCachedMessage + runtimes.DependencySet(rt.Name, p.Dependencies.Hash) + "\n"
			assert.Equal(t, cached, message(), "the termination message says the cache holds the set once stored")

			second, out := install()
			assert.Equal(t, cached, message(), "and once taken from it")
			assert.Contains(t, out, "from the cache")
			assert.NotContains(t, ran(), tc.manager, "no npm or pip")
			assert.Equal(t, before, asked(), "no npm or pip: the registry was not asked again\n%s", out)
			assert.Equal(t, treeOf(t, first), treeOf(t, second), "the cache gives the tree the install made")
		})
	}
}

// treeOf lists a directory: relative paths with their content, or link
// targets, or "dir"; package managers' caches of file times left out.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link -> " + target
			return err
		case info.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	}))
	return out
}

// TestInstallContainerRunsAgainAfterAFailedInstall: the kubelet restarts
// an install container whose npm failed (a registry down, say) in the same
// dependencies volume, where the first run left the copied package.json
// with the ConfigMap's read-only mode; the second run must get past the
// copy to npm. Run as an unprivileged user, as in the pod (root writes
// over a read-only file). Fails with a plain cp: "Permission denied".
func TestInstallContainerRunsAgainAfterAFailedInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the script as another, unprivileged user")
	}
	p, err := plan.For(fntest.Function("f", "ns", fntest.Source(fntest.HelloJS, `{"dependencies":{"kfn-greet":"1.0.0"}}`)), planConfig)
	require.NoError(t, err)
	require.NoError(t, p.SetAutoscaler(true, false))
	ic := container(typed[appsv1.Deployment](t, resources.Deployment(p, testConfig())).Spec.Template.Spec, resources.ContainerInstallDeps)
	require.NotNil(t, ic)

	open := func(dir string) string {
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755)) // the test's own temporary directory
		require.NoError(t, os.Chmod(dir, 0o777))
		return dir
	}
	source, deps, tmp, bin, registry := open(t.TempDir()), open(t.TempDir()), open(t.TempDir()), open(t.TempDir()), open(t.TempDir())
	require.NoError(t, os.WriteFile(filepath.Join(source, "package.json"), []byte(p.Dependencies.Content), 0o444))
	// npm fails the first time, as with a registry down, and succeeds
	// the next.
	failed := filepath.Join(tmp, "failed-once")
	npm := fmt.Sprintf("#!/bin/sh\nif [ ! -f %s ]; then touch %s; echo 'npm: registry unreachable' >&2; exit 1; fi\necho 'npm: installed'\n", failed, failed)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "npm"), []byte(npm), 0o755))
	moved := strings.NewReplacer(runtimes.PodDepsDir, deps, runtimes.PodSourceDir, source, resources.RegistryConfigDir, registry, "/tmp", tmp)
	run := func() (string, error) {
		cmd := exec.Command(ic.Command[0], ic.Command[1], moved.Replace(ic.Command[2]))
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	require.Error(t, err, "the first install fails: %s", out)
	assert.Contains(t, out, "registry unreachable")
	out, err = run()
	require.NoError(t, err, "the restarted install container gets to npm again: %s", out)
	assert.Contains(t, out, "npm: installed")
}
