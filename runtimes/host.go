package runtimes

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

//go:embed nodejs/*.cjs nodejs/*.mjs nodejs/modules/sdk/* python/*.py python/kfnhost/*.py python/api/*.py
var hostFiles embed.FS

// hostFS returns the host files, laid out as WriteHost writes them:
// nodejs/server.cjs and its modules (nodejs/modules/sdk, the sdk package of
// nodejs26 handlers), python/kfn_main.py, the python/kfnhost package and
// python/api/sdk.py (the sdk module of python314 handlers).
func hostFS() fs.FS {
	return hostFiles
}

var hostVersion = sync.OnceValue(func() string {
	var names []string
	err := fs.WalkDir(hostFiles, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		panic(fmt.Sprintf("walk embedded host files: %v", err))
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := hostFiles.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("read embedded host file %s: %v", n, err))
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})

// HostVersion returns a short hash of the embedded host files. Two builds
// with the same host files have the same version.
func HostVersion() string {
	return hostVersion()
}

// WriteHost makes sure the host files are on disk under root and returns
// the directory to pass to Runtime.Command: root/<HostVersion()>. The
// directory is content-addressed and created by an atomic rename, so
// concurrent callers (several kfn dev processes) are safe and an existing
// directory is reused without writing anything. root is created if missing.
func WriteHost(root string) (string, error) {
	dir := filepath.Join(root, HostVersion())
	if _, err := os.Stat(filepath.Join(dir, "nodejs", "server.cjs")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("write host files: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-host-")
	if err != nil {
		return "", fmt.Errorf("write host files: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op after a successful rename
	err = fs.WalkDir(hostFiles, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(tmp, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := hostFiles.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("write host files to %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("write host files: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another writer won the race; its directory has the same content.
		if _, statErr := os.Stat(filepath.Join(dir, "nodejs", "server.cjs")); statErr == nil {
			return dir, nil
		}
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("write host files: %s exists but is incomplete: %w", dir, err)
		}
		return "", fmt.Errorf("write host files: %w", err)
	}
	return dir, nil
}
