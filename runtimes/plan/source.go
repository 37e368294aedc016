package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/runtimes/deps"
)

// Source is a function's code: inline files, or a Git directory at a commit.
type Source struct {
	// Files maps a file name in the function directory to its content:
	// the handler (handler.js or handler.py) and, when the Function has
	// any, its dependency file (package.json, which also tells Node.js
	// whether handler.js is an ES module, or requirements.txt). Empty for
	// a Git source, whose files are fetched.
	Files map[string]string
	// Git is set for a Git source.
	Git *GitSource
	// Hash is a hex SHA-256 that changes exactly when the code the
	// function runs changes: the runtime and Files, or the Git URL,
	// directory and commit. Environment, resources and scaling are not
	// part of it.
	Hash string
}

// GitSource is a directory of a Git repository at a resolved commit.
type GitSource struct {
	// URL of the repository.
	URL string
	// BaseDir is the directory inside the repository, cleaned of leading
	// and trailing slashes ("" for the root).
	BaseDir string
	// Reference is the branch, tag or commit the user asked for.
	Reference string
	// Commit is the full hash Reference resolved to.
	Commit string
	// Auth names the credentials Secret; nil for a public repository.
	Auth *v1alpha2.RepositoryAuth
}

// Dependencies is a function's dependency set.
type Dependencies struct {
	// File is the dependency file name for the runtime: package.json or
	// requirements.txt.
	File string
	// Content is the inline dependency file; empty for a Git source.
	Content string
	// Needed reports whether something must be installed before the host
	// starts (runtimes/deps.Needed). Always false for a Git source: see
	// FromSource.
	Needed bool
	// FromSource is true for a Git source: the dependency file, if the
	// directory has one, comes with the fetched files and is installed
	// when present.
	FromSource bool
	// Hash is the installed set's cache key (deps.Key with no registry
	// configuration) when Needed, else "".
	Hash string
	// Cached reports that the dependency cache holds the set, as the
	// Function's pods said (Plan.SetDependenciesCached).
	Cached bool
	// AtStart reports that the host fetches the set from the cache when it
	// starts, in place of the install init container
	// (Plan.SetDependenciesCached).
	AtStart bool
}

// Install reports whether running the function needs an install step.
func (d Dependencies) Install() bool { return d.Needed || d.FromSource }

// InstallContainer reports whether the Function's pods install their
// dependencies in an init container: when they need an install step that
// their host does not take from the cache.
func (d Dependencies) InstallContainer() bool { return d.Install() && !d.AtStart }

// ErrNotCacheable is returned by Plan.SetDependenciesCached for a Function
// whose dependency set the cache does not keep: no inline dependencies, or
// no cache configured.
var ErrNotCacheable = errors.New("the dependency cache does not keep this Function's dependencies")

// SetDependenciesCached records that the dependency cache holds p's
// dependency set and, with atStart, that p's host fetches it when it
// starts (KFN_DEPENDENCY_HASH) instead of an install init container
// taking it: a pod starts one container fewer. Only the platform's own
// image is known to fetch at start (PlatformImage): another keeps the
// install container. On error (ErrNotCacheable) p is left as it was.
func (p *Plan) SetDependenciesCached(atStart bool) error {
	if p.Dependencies.Hash == "" || p.Host.DependencyCache == "" || p.Host.DepsDir == "" {
		return fmt.Errorf("%w: %s/%s", ErrNotCacheable, p.Namespace, p.Name)
	}
	atStart = atStart && p.PlatformImage
	h := p.Host
	if atStart {
		h.DependencyHash = p.Dependencies.Hash
	}
	env, err := p.EnvFor(h)
	if err != nil {
		return err
	}
	p.Host, p.Env = h, env
	p.Dependencies.Cached, p.Dependencies.AtStart = true, atStart
	return nil
}

// setSource sets Source and Dependencies from fn's spec: inline files, or
// a Git directory at the commit fn's status resolved.
func (p *Plan) setSource(fn *v1alpha2.Function) error {
	rt := p.Runtime
	p.Dependencies.File = rt.DepsFile()
	switch src := fn.Spec.Source; {
	case src.Inline != nil:
		p.Source.Files = map[string]string{rt.SourceFile(): src.Inline.Source}
		if strings.TrimSpace(src.Inline.Dependencies) != "" {
			p.Source.Files[rt.DepsFile()] = src.Inline.Dependencies
			p.Dependencies.Content = src.Inline.Dependencies
		}
		needed, err := deps.Needed(rt, src.Inline.Dependencies)
		if err != nil {
			return fmt.Errorf("%w: spec.source.inline.dependencies: %w", ErrInvalidFunction, err)
		}
		if needed {
			p.Dependencies.Needed = true
			p.Dependencies.Hash = deps.Key(rt, src.Inline.Dependencies, deps.Registry{})
		}
		p.Source.Hash = hash("inline", rt.Name, p.Source.Files)
	case src.GitRepository != nil:
		g := src.GitRepository
		st := fn.Status.GitRepository
		baseDir := strings.Trim(strings.TrimSpace(g.BaseDir), "/")
		if st == nil || st.Commit == "" || st.URL != g.URL || st.Reference != g.Reference || strings.Trim(strings.TrimSpace(st.BaseDir), "/") != baseDir {
			return fmt.Errorf("%w: %w: %s at %q", ErrInvalidFunction, ErrUnresolvedCommit, g.URL, g.Reference)
		}
		p.Source.Git = &GitSource{URL: g.URL, BaseDir: baseDir, Reference: g.Reference, Commit: st.Commit, Auth: g.Auth.DeepCopy()}
		p.Dependencies.FromSource = true
		p.Source.Hash = hash("git", rt.Name, map[string]string{"url": g.URL, "baseDir": baseDir, "commit": st.Commit})
	default:
		return fmt.Errorf("%w: spec.source: set inline or gitRepository", ErrInvalidFunction)
	}
	return nil
}

// hash is a hex SHA-256 of a kind, a runtime and a map, with lengths
// written out so that no two inputs collide by concatenation.
func hash(kind, runtime string, files map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "kfn-source-v1\x00%s\x00%s\x00", kind, runtime)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%d:%s\x00%d:%s\x00", len(name), name, len(files[name]), files[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}
