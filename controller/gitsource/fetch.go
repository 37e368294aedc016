package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/kfn-dev/kfn/internal/egress"
)

// ErrInvalidFetch is wrapped by Fetch for options it cannot use.
var ErrInvalidFetch = errors.New("invalid fetch")

// FetchOptions say what Fetch copies where.
type FetchOptions struct {
	// URL of the repository.
	URL string
	// Commit is the full hash to check out.
	Commit string
	// BaseDir is the directory of the repository to copy ("" or "/" for
	// the root). It must stay inside the repository.
	BaseDir string
	// Dest is the directory that receives BaseDir's content; it is created
	// when missing and should be empty.
	Dest string
	// WorkDir holds the temporary clone; "" means os.TempDir().
	WorkDir string
	// Auth may be nil for a public repository.
	Auth transport.AuthMethod
	// Egress is where the server, and the redirects it answers, may lead
	// (errors wrap egress.ErrRefused otherwise); the zero Policy refuses
	// loopback, link-local and the other addresses it always refuses.
	Egress egress.Policy
}

// Fetch clones the repository into a temporary directory, checks out
// Commit, and copies BaseDir's files (regular files, directories and
// symbolic links; not .git) into Dest. The clone is removed afterwards.
// The clone has the branches; a commit none of them reaches (one only a
// tag reaches) is looked for in the tags too.
func Fetch(ctx context.Context, o FetchOptions) error {
	if o.URL == "" || o.Dest == "" || !commitHash.MatchString(o.Commit) {
		return fmt.Errorf("%w: need a URL, a destination and a full commit hash (got %q)", ErrInvalidFetch, o.Commit)
	}
	o.Commit = strings.ToLower(o.Commit)
	base := path.Clean("/" + strings.TrimSpace(o.BaseDir))
	work, err := os.MkdirTemp(o.WorkDir, "kfn-git-")
	if err != nil {
		return fmt.Errorf("create clone directory: %w", err)
	}
	defer os.RemoveAll(work)
	ctx, repoURL, auth, err := useEgress(ctx, o.Egress, o.URL, o.Auth)
	if err != nil {
		return fmt.Errorf("clone %s: %w", o.URL, err)
	}
	o.Auth = auth
	repo, err := git.PlainCloneContext(ctx, work, false, &git.CloneOptions{URL: repoURL, Auth: o.Auth, NoCheckout: true, Tags: git.NoTags})
	if err != nil {
		return fmt.Errorf("clone %s: %w", o.URL, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return fmt.Errorf("open work tree: %w", err)
	}
	// go-git changes the options it is given, so each try gets its own.
	checkout := func() *git.CheckoutOptions {
		return &git.CheckoutOptions{Hash: plumbing.NewHash(o.Commit), Force: true}
	}
	if err := wt.Checkout(checkout()); err != nil {
		tags := &git.FetchOptions{Auth: o.Auth, RefSpecs: []config.RefSpec{"+refs/tags/*:refs/tags/*"}, Tags: git.NoTags}
		if ferr := repo.FetchContext(ctx, tags); ferr != nil && !errors.Is(ferr, git.NoErrAlreadyUpToDate) {
			return fmt.Errorf("check out %s: %w (fetching the tags too: %w)", o.Commit, err, ferr)
		}
		if err := wt.Checkout(checkout()); err != nil {
			return fmt.Errorf("check out %s: %w", o.Commit, err)
		}
	}
	src := filepath.Join(work, filepath.FromSlash(base))
	info, err := os.Stat(src)
	if err != nil || !info.IsDir() {
		return fmt.Errorf("%w: base directory %q does not exist at commit %s", ErrInvalidFetch, o.BaseDir, o.Commit)
	}
	if err := os.MkdirAll(o.Dest, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.Dest, err)
	}
	return copyTree(src, o.Dest)
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(p, target, info.Mode().Perm()|0o444)
		default:
			return nil
		}
	})
}

func copyFile(from, to string, mode fs.FileMode) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(out, in)
	return err
}
