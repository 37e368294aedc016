package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

func (r *Runner) planConfig() plan.Config {
	images := map[string]string{}
	for _, rt := range runtimes.All() {
		images[rt.Name] = "local/" + rt.Name // not used locally, but a plan names one
	}
	return plan.Config{Images: images, PublisherAddress: r.cfg.PublisherAddress, TraceCollectorEndpoint: r.cfg.TraceCollectorEndpoint}
}

// spec turns a plan into a process spec: the function's files written to a
// directory named by their hash, dependencies installed in the shared
// cache, the host from the state directory, env resolved.
func (r *Runner) spec(ctx context.Context, p plan.Plan) (supervisor.Spec, []string, error) {
	var warnings []string
	if p.Source.Git != nil {
		return supervisor.Spec{}, nil, errors.New("git sources do not run in kfn dev yet: use an inline source or a function folder")
	}
	fnDir := filepath.Join(r.cfg.StateDir, "functions", p.Namespace, p.Name, p.Source.Hash[:16])
	if err := writeFiles(fnDir, p.Source.Files); err != nil {
		return supervisor.Spec{}, nil, err
	}
	depsDir := ""
	if p.Dependencies.Needed {
		dir, err := r.installer.Ensure(ctx, p.Runtime, p.Dependencies.Content, r.cfg.Registry)
		if err != nil {
			return supervisor.Spec{}, nil, err
		}
		depsDir = dir
	}
	// The libraries Kyma's Node.js images provide, installed once into the
	// dependency cache, for a handler that names one of them (a runtime
	// image has them; installing them for every function would make a
	// first start wait on npm for nothing).
	libsDir := ""
	if p.Runtime.Language == runtimes.NodeJS && mentionsNodeLibrary(p) {
		dir, err := r.installer.Ensure(ctx, p.Runtime, runtimes.NodeLibraries(), r.cfg.Registry)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("the libraries Kyma's runtime images provide (%s) could not be installed, so a require of them fails: %v",
				strings.Join(runtimes.NodeLibraryNames(), ", "), firstLine(err.Error())))
		}
		libsDir = dir
	}
	// fnDir is the source, written once per content; each process gets a
	// writable function directory of its own with the source copied in, as
	// a pod's emptyDir (Spec.RunDir replaces the FunctionDir set here).
	h := p.Host
	h.HostDir = r.hostDir
	h.LibsDir = libsDir
	h.SourceDir = fnDir
	h.FunctionDir = fnDir
	h.DepsDir = depsDir
	h.Port = 0
	h.ListenFD = 3
	h.IdentityTokenFile = ""
	if r.cfg.IdentityTokenFile != nil {
		path, err := r.cfg.IdentityTokenFile(p.Namespace)
		if err != nil {
			return supervisor.Spec{}, nil, fmt.Errorf("the identity of namespace %s: %w", p.Namespace, err)
		}
		h.IdentityTokenFile = path
	}
	env, err := p.EnvFor(h)
	if err != nil {
		return supervisor.Spec{}, nil, err
	}
	kv, envWarnings := r.resolveEnv(p, append(imageEnv(p.Runtime), env...))
	warnings = append(warnings, envWarnings...)
	if len(p.SecretMounts) > 0 {
		warnings = append(warnings, "secretMounts are not mounted locally; read the values from env instead")
	}
	if w := r.versionWarning(p.Runtime); w != "" {
		warnings = append(warnings, w)
	}
	if p.Deprecation != "" {
		warnings = append(warnings, p.Deprecation)
	}
	warnings = append(warnings, p.Notes...)
	return supervisor.Spec{
		Argv:       p.Runtime.Command(r.hostDir),
		Env:        kv,
		Dir:        fnDir,
		RunDir:     filepath.Join(r.runDir, p.Namespace, p.Name),
		RunDirEnv:  runtimes.EnvFunctionDir,
		HealthPath: p.Readiness.Path,
	}, warnings, nil
}

// versionWarning returns a warning, once per runtime, when the local
// interpreter's version differs from the runtime's.
func (r *Runner) versionWarning(rt runtimes.Runtime) string {
	r.mu.Lock()
	warned := r.warns[rt.Name]
	r.warns[rt.Name] = true
	r.mu.Unlock() // not held while the interpreter runs: Get and Functions go on
	if warned {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, rt.Interpreter, "--version").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s is needed for %s but did not run: %v", rt.Interpreter, rt.Name, err)
	}
	got := strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(string(out), "Python")), "v")
	if !strings.HasPrefix(got, rt.Version+".") && got != rt.Version {
		return fmt.Sprintf("%s runs on %s %s locally (the cluster image has %s); differences are possible", rt.Name, rt.Interpreter, got, rt.Version)
	}
	return ""
}

// mentionsNodeLibrary reports whether a function's source files name one
// of the libraries Kyma's Node.js images provide.
func mentionsNodeLibrary(p plan.Plan) bool {
	for _, content := range p.Source.Files {
		if runtimes.MentionsNodeLibrary(content) {
			return true
		}
	}
	return false
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// userPaths replaces the directory of one process of a function
// (<runDir>/p-<n>, where its source was copied) in msg with source: the
// function folder, or "<manifest> (inline source)".
func userPaths(msg, runDir, source string) string {
	if runDir == "" || source == "" {
		return msg
	}
	re := regexp.MustCompile(regexp.QuoteMeta(runDir+string(filepath.Separator)) + `p-[0-9]+` + regexp.QuoteMeta(string(filepath.Separator)))
	to := source + string(filepath.Separator)
	if info, err := os.Stat(source); err == nil && !info.IsDir() {
		to = source + " (inline source) "
	}
	return re.ReplaceAllLiteralString(msg, to)
}

// writeFiles writes a function's files into dir once: the directory name is
// their hash, so an existing directory already holds them.
func writeFiles(dir string, files map[string]string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	tmp := dir + ".tmp-" + fmt.Sprint(os.Getpid())
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("write function files: %w", err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("write function files: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		if _, statErr := os.Stat(dir); statErr == nil {
			return nil // another writer won
		}
		return fmt.Errorf("write function files: %w", err)
	}
	return nil
}

func specHash(s supervisor.Spec) string {
	h := sha256.New()
	for _, part := range [][]string{s.Argv, s.Env, {s.Dir, s.RunDir, s.RunDirEnv, s.HealthPath}} {
		for _, v := range part {
			h.Write([]byte(v))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}
