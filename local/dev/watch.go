package dev

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/kfn-dev/kfn/local/project"
)

// watch reloads the project whenever a file under it changes (a new,
// removed or modified file outside hidden and dependency directories). It
// polls: cheap for a project directory, and the same on every platform.
func (p *Platform) watch(ctx context.Context) {
	last := fingerprint(p.cfg.Dir)
	ticker := time.NewTicker(p.cfg.WatchInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := fingerprint(p.cfg.Dir)
		if now == last {
			continue
		}
		last = now
		fmt.Fprintln(p.out, "kfn: project changed, reloading")
		p.reload(ctx)
	}
}

// fingerprint hashes the names, sizes and modification times of the
// project's files.
func fingerprint(dir string) string {
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && project.SkipDir(name) {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", path, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}
