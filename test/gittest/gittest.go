// Package gittest serves a Git repository over smart HTTP on loopback for
// tests: the repository is made with go-git, and git's own http-backend
// serves it through net/http/cgi, optionally behind basic auth.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/kfn-dev/kfn/test/testenv"
)

// Repo is a repository with a branch main, served at URL.
type Repo struct {
	// URL is the repository's http:// URL on loopback.
	URL  string
	repo *git.Repository
	dir  string

	mu             sync.Mutex
	authorizations []string
}

// Authorizations returns the Authorization header of every request the
// server got so far, in order ("" for a request without one).
func (r *Repo) Authorizations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.authorizations)
}

// New creates an empty repository and serves it until the test ends.
// With a non-empty user, requests need basic auth with user and password.
// A missing git or http-backend skips the test, or fails it under CI=true
// (package testenv).
func New(t testing.TB, user, password string) *Repo {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		testenv.Missing(t, "git", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		testenv.Missing(t, "git http-backend", err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "repo")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}})
	if err != nil {
		t.Fatalf("init repository: %v", err)
	}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	served := &Repo{repo: repo, dir: dir}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.mu.Lock()
		served.authorizations = append(served.authorizations, r.Header.Get("Authorization"))
		served.mu.Unlock()
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	served.URL = srv.URL + "/repo/.git"
	return served
}

// Commit writes files (path -> content; "" deletes the file) in the work
// tree, commits them on the current branch and returns the commit hash.
func (r *Repo) Commit(t testing.TB, files map[string]string) string {
	t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if content == "" {
			if _, err := wt.Remove(name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	h, err := wt.Commit("change", &git.CommitOptions{Author: &object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(1700000000, 0)}, AllowEmptyCommits: true})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// Tag tags the current commit; annotated makes a tag object.
func (r *Repo) Tag(t testing.TB, name string, annotated bool) {
	t.Helper()
	head, err := r.repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Message: name, Tagger: &object.Signature{Name: "test", Email: "test@example.com", When: time.Unix(1700000000, 0)}}
	}
	if _, err := r.repo.CreateTag(name, head.Hash(), opts); err != nil {
		t.Fatal(err)
	}
}

// Branch creates a branch at the current commit and checks it out.
func (r *Repo) Branch(t testing.TB, name string) {
	t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Create: true}); err != nil {
		t.Fatal(err)
	}
}

// Checkout checks out the existing branch name.
func (r *Repo) Checkout(t testing.TB, name string) {
	t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name)}); err != nil {
		t.Fatal(err)
	}
}

// DeleteBranch deletes the branch name (not the current one): its commits
// stay, reached only by what else points at them (a tag).
func (r *Repo) DeleteBranch(t testing.TB, name string) {
	t.Helper()
	if err := r.repo.Storer.RemoveReference(plumbing.NewBranchReferenceName(name)); err != nil {
		t.Fatal(err)
	}
}

// AddSubmodule commits a submodule at path that points to url, with git
// itself (go-git cannot add one); url is cloned once to do so.
func (r *Repo) AddSubmodule(t testing.TB, path, url string) {
	t.Helper()
	for _, args := range [][]string{
		{"-c", "protocol.file.allow=always", "submodule", "add", url, path},
		{"-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-m", "submodule"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = r.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
