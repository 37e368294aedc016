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

// maxReread bounds the wait between two readings of a project that could
// not be read whole.
const maxReread = 30 * time.Second

// watch reloads the project whenever a file under it changes (a new,
// removed or modified file outside hidden and dependency directories),
// once the change has settled (settle). It polls: cheap for a project
// directory, and the same on every platform.
//
// A project that could not be read whole (a directory or a file that
// cannot be read: kfn dev out of file descriptors, a permission) was
// applied with what that part defined kept as it was (reload); it is read
// again, every WatchInterval at first, then less often up to maxReread,
// until it reads whole.
//
// A function is installed and started in the background, its reload not
// waiting for it (runner.Runner.Apply), so that one function that is slow
// holds up no other's edits, Subscriptions, APIRules or deletions. When
// one is done (runner.Runner.Changes), the project is applied again: its
// errors are reported, and its scaling applied.
func (p *Platform) watch(ctx context.Context) {
	last := fingerprint(p.cfg.Dir)
	var applied uint64 // the runner's Changes last applied (any is after the first load)
	reread := p.cfg.WatchInterval
	var rereadAt time.Time
	ticker := time.NewTicker(p.cfg.WatchInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		p.mu.Lock()
		unread := p.unread
		p.mu.Unlock()
		now := fingerprint(p.cfg.Dir)
		if now != last {
			now = settle(ctx, now, func() string { return fingerprint(p.cfg.Dir) },
				min(p.cfg.WatchInterval, 100*time.Millisecond), maxSettle)
		}
		changes := p.runner.Changes()
		switch {
		case ctx.Err() != nil:
			return
		case now != last:
			fmt.Fprintln(p.out, "kfn: project changed, reloading")
		case changes != applied:
			// A function's install or start was done in the background.
		case !unread:
			continue
		case rereadAt.IsZero():
			rereadAt = time.Now().Add(reread)
			continue
		case time.Now().Before(rereadAt):
			continue
		default:
			fmt.Fprintln(p.out, "kfn: reading the project again: part of it could not be read")
		}
		last, applied = now, changes
		p.reload(ctx)
		p.mu.Lock()
		unread = p.unread
		p.mu.Unlock()
		if !unread {
			reread, rereadAt = p.cfg.WatchInterval, time.Time{}
			continue
		}
		reread = min(2*reread, maxReread)
		rereadAt = time.Now().Add(reread)
	}
}

// maxSettle bounds how long a project that keeps changing is waited for
// before it is read as it is then.
const maxSettle = 2 * time.Second

// settle waits for a project seen changed (its fingerprint now) to look
// the same twice in a row, pause apart, and returns its fingerprint then:
// an editor saving a file truncates it and then writes it (or writes
// several files), and reading the project in between would apply a file
// half-saved. A project still changing after limit is read as it is.
func settle(ctx context.Context, now string, look func() string, pause, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return now
		case <-timer.C:
		}
		again := look()
		if again == now {
			return now
		}
		now = again
		timer.Reset(pause)
	}
	return now
}

// fingerprint hashes the names, sizes and modification times of the
// project's files, and the errors of reading them: a directory that could
// not be listed and then can is a change.
func fingerprint(dir string) string {
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "%s\x00error\x00%v\n", path, err)
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
			fmt.Fprintf(h, "%s\x00error\x00%v\n", path, err)
			return nil
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", path, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}
