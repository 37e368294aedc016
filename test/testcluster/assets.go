package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// modulePath is the path of the module whose checkout holds the CRDs and
// hack/envtest-assets.sh.
const modulePath = "github.com/kfn-dev/kfn"

// assetsScript builds the binaries when missing and prints their directory.
const assetsScript = "hack/envtest-assets.sh"

// assetsEnv names the directory holding kube-apiserver and etcd, as in
// controller-runtime's envtest.
const assetsEnv = "KUBEBUILDER_ASSETS"

// resolveAssets runs at most once per process: building the binaries is
// slow, and the script's answer cannot change while tests run.
var resolveAssets = sync.OnceValues(findAssets)

// findAssets returns the directory holding kube-apiserver and etcd: the one
// in KUBEBUILDER_ASSETS, or else the one hack/envtest-assets.sh prints after
// building the binaries there if they are missing.
func findAssets() (string, error) {
	if dir := os.Getenv(assetsEnv); dir != "" {
		if err := checkAssets(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w (run %s to build them, or unset %s to build them automatically)",
				assetsEnv, dir, err, assetsScript, assetsEnv)
		}
		return dir, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("find envtest binaries: %w; set %s to a directory holding kube-apiserver and etcd", err, assetsEnv)
	}
	script := filepath.Join(root, assetsScript)
	cmd := exec.Command("bash", script)
	cmd.Dir = root
	cmd.Stderr = os.Stderr // the script's progress; a cold build takes minutes
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("no kube-apiserver and etcd: building them with %s failed: %w", script, err)
	}
	dir := strings.TrimSpace(string(out))
	if err := checkAssets(dir); err != nil {
		return "", fmt.Errorf("%s printed %q: %w", script, dir, err)
	}
	return dir, nil
}

// checkAssets reports whether dir holds both binaries.
func checkAssets(dir string) error {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("no %s binary: %w", name, err)
		}
		if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, name))
		}
	}
	return nil
}

// errNoModuleRoot is returned when no directory above the working directory
// holds kfn's go.mod.
var errNoModuleRoot = errors.New("no go.mod of module " + modulePath + " in the working directory or above it")

// moduleRoot walks up from the working directory to the directory whose
// go.mod declares kfn's main module. It passes over other modules' go.mod
// files, such as e2e/go.mod, on the way.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modfile.ModulePath(data) == modulePath {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read go.mod: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errNoModuleRoot
		}
		dir = parent
	}
}

// ModuleDir returns the directory of module (as the module cache holds
// it) in the version the calling test's module builds with: where a
// dependency's CRDs are (KEDA's, the Gateway API's), installed with
// WithCRDPaths as its own installation would.
func ModuleDir(t testing.TB, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	require.NoError(t, err, "find the module %s", module)
	return strings.TrimSpace(string(out))
}
