package deps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/runtimes"
)

// ErrInstall is wrapped by the error Ensure returns when the package
// installer (npm or pip) failed; the error text includes its output.
var ErrInstall = errors.New("install dependencies")

// errTimeout is the cause of an installation's context that ended at the
// Installer's timeout (not the caller's).
var errTimeout = errors.New("install timeout")

// ErrInvalidOption is wrapped by New for an option it cannot use.
var ErrInvalidOption = errors.New("invalid deps option")

// maxOutput bounds how much installer output an error carries (its tail).
const maxOutput = 16 << 10

// keptOutput bounds the installer output kept in memory while it runs: the
// last 64 KiB, of which an error carries the last maxOutput bytes. An
// installer that writes gigabytes costs no more.
const keptOutput = 64 << 10

// maxLine bounds one line of installer output passed on to the progress
// writer: the rest of a longer line is left out, never buffered.
const maxLine = 4 << 10

// DefaultTimeout bounds one installation (the wait for another caller's
// installation of the same set included) unless WithTimeout says
// otherwise: an installer that never ends (a postinstall script that
// loops, a registry that never answers) is stopped then, and Ensure
// returns an error that wraps ErrInstall and context.DeadlineExceeded.
const DefaultTimeout = 5 * time.Minute

// Registry configures the package registries an installation uses: the
// content of an .npmrc file for npm and of a pip.conf file for pip (registry
// or index URLs, scopes, credentials, trusted hosts). Empty content leaves the
// installer's own configuration in effect.
type Registry struct {
	NPMRC   string // content of an .npmrc file, given to npm as its user config
	PipConf string // content of a pip.conf file, given to pip as PIP_CONFIG_FILE
}

// Installer installs dependency sets into a cache directory.
type Installer struct {
	cacheDir string
	npm      string
	python   string
	env      []string
	progress io.Writer
	timeout  time.Duration
}

// Option configures an Installer.
type Option func(*Installer) error

// WithNPM sets the npm executable (default "npm", looked up in PATH).
func WithNPM(path string) Option {
	return func(i *Installer) error {
		if path == "" {
			return fmt.Errorf("%w: empty npm path", ErrInvalidOption)
		}
		i.npm = path
		return nil
	}
}

// WithProgress writes what an installation does to w as it happens: a
// line when it starts, the installer's own output, and a line when it is
// done, so that a wait of seconds or minutes is not silent. w must be safe
// for concurrent writes of whole lines.
func WithProgress(w io.Writer) Option {
	return func(i *Installer) error {
		if w == nil {
			return fmt.Errorf("%w: nil progress writer", ErrInvalidOption)
		}
		i.progress = w
		return nil
	}
}

// WithTimeout bounds each call of Ensure that installs (the wait for
// another caller's installation of the same set included) to d; default
// DefaultTimeout. d must be positive.
func WithTimeout(d time.Duration) Option {
	return func(i *Installer) error {
		if d <= 0 {
			return fmt.Errorf("%w: install timeout %s: want more than 0", ErrInvalidOption, d)
		}
		i.timeout = d
		return nil
	}
}

// WithPython sets the Python interpreter whose pip installs Python
// dependencies (default "python3", looked up in PATH; run as python3 -m pip).
func WithPython(path string) Option {
	return func(i *Installer) error {
		if path == "" {
			return fmt.Errorf("%w: empty python path", ErrInvalidOption)
		}
		i.python = path
		return nil
	}
}

// WithEnv adds environment variables (KEY=value) to the installer processes,
// on top of the calling process's environment.
func WithEnv(env ...string) Option {
	return func(i *Installer) error {
		for _, kv := range env {
			if !strings.Contains(kv, "=") {
				return fmt.Errorf("%w: environment entry %q is not KEY=value", ErrInvalidOption, kv)
			}
		}
		i.env = append(i.env, env...)
		return nil
	}
}

// New returns an Installer that keeps installed dependency sets under
// cacheDir, which is created when missing.
func New(cacheDir string, opts ...Option) (*Installer, error) {
	if cacheDir == "" {
		return nil, fmt.Errorf("%w: empty cache directory", ErrInvalidOption)
	}
	abs, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("%w: cache directory %q: %v", ErrInvalidOption, cacheDir, err)
	}
	i := &Installer{cacheDir: abs, npm: "npm", python: "python3", timeout: DefaultTimeout}
	for _, o := range opts {
		if err := o(i); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(abs, ".locks"), 0o755); err != nil {
		return nil, fmt.Errorf("create dependency cache: %w", err)
	}
	return i, nil
}

// Key returns the cache key of a dependency set: the hex SHA-256 of the
// runtime name, the dependency file and the registry configuration. A
// different registry may serve different packages under the same names, so
// it is part of the key.
func Key(rt runtimes.Runtime, dependencies string, reg Registry) string {
	h := sha256.New()
	// v2: devDependencies installed too (v1 sets lack them).
	for _, part := range []string{"kfn-deps-v2", rt.Name, dependencies, reg.NPMRC, reg.PipConf} {
		fmt.Fprintf(h, "%d:%s\x00", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Needed reports whether a dependency file asks for anything to install: a
// package.json with at least one entry in "dependencies",
// "optionalDependencies" or "devDependencies" (installed too, as Kyma's
// images install them), or a requirements.txt with a line that is not
// blank or a comment. It returns an error for a package.json that is not a
// JSON object.
func Needed(rt runtimes.Runtime, dependencies string) (bool, error) {
	if strings.TrimSpace(dependencies) == "" {
		return false, nil
	}
	if rt.Language == runtimes.Python {
		for _, line := range strings.Split(dependencies, "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") {
				return true, nil
			}
		}
		return false, nil
	}
	var pkg struct {
		Dependencies         map[string]any `json:"dependencies"`
		OptionalDependencies map[string]any `json:"optionalDependencies"`
		DevDependencies      map[string]any `json:"devDependencies"`
	}
	if err := json.Unmarshal([]byte(dependencies), &pkg); err != nil {
		return false, fmt.Errorf("parse package.json: %w", err)
	}
	return len(pkg.Dependencies)+len(pkg.OptionalDependencies)+len(pkg.DevDependencies) > 0, nil
}

// Ensure returns the directory holding rt's installed dependencies for the
// given dependency file (package.json or requirements.txt text), installing
// them first unless an earlier call did. It returns "" and no error when
// there is nothing to install (see Needed): such a function runs without a
// dependency directory.
//
// The directory is <cache>/<Key(...)>; pass it as runtimes.Config.DepsDir.
// It contains the dependency file and node_modules/ (Node.js) or
// site-packages/ (Python); never the registry configuration, which may hold
// credentials. Callers with the same key wait for one installation. When
// the installer fails, the error wraps ErrInstall, carries the tail of the
// installer's output, and nothing is left in the cache. Cancelling ctx stops
// the installer and the wait for the lock, and so does the Installer's
// timeout (WithTimeout, default DefaultTimeout): then the error wraps
// context.DeadlineExceeded too.
func (i *Installer) Ensure(ctx context.Context, rt runtimes.Runtime, dependencies string, reg Registry) (string, error) {
	need, err := Needed(rt, dependencies)
	if err != nil {
		return "", fmt.Errorf("%w for %s: %w", ErrInstall, rt.Name, err)
	}
	if !need {
		return "", nil
	}
	key := Key(rt, dependencies, reg)
	dir := filepath.Join(i.cacheDir, key)
	if exists(dir) {
		return dir, nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, i.timeout, errTimeout)
	defer cancel()
	unlock, err := lock(ctx, filepath.Join(i.cacheDir, ".locks", key+".lock"))
	if err != nil {
		return "", fmt.Errorf("%w for %s: wait for the installation of dependency set %s under way: %w", ErrInstall, rt.Name, key[:12], err)
	}
	defer unlock()
	if exists(dir) {
		return dir, nil // installed by whoever held the lock before us
	}
	if err := i.install(ctx, rt, dependencies, reg, key, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func exists(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}

// install installs rt's dependencies into dir: the installer runs in a
// temporary directory of the cache, renamed to dir once it succeeded.
func (i *Installer) install(ctx context.Context, rt runtimes.Runtime, dependencies string, reg Registry, key, dir string) error {
	tmp, err := os.MkdirTemp(i.cacheDir, ".tmp-"+key[:12]+"-")
	if err != nil {
		return fmt.Errorf("%w for %s: %w", ErrInstall, rt.Name, err)
	}
	defer os.RemoveAll(tmp) // a no-op after the rename
	// Registry configuration goes next to, not into, the directory that
	// becomes the cache entry.
	confDir, err := os.MkdirTemp(i.cacheDir, ".conf-")
	if err != nil {
		return fmt.Errorf("%w for %s: %w", ErrInstall, rt.Name, err)
	}
	defer os.RemoveAll(confDir)

	if err := os.WriteFile(filepath.Join(tmp, rt.DepsFile()), []byte(dependencies), 0o644); err != nil {
		return fmt.Errorf("%w for %s: %w", ErrInstall, rt.Name, err)
	}
	argv, env, err := i.command(rt, reg, tmp, confDir)
	if err != nil {
		return fmt.Errorf("%w for %s: %w", ErrInstall, rt.Name, err)
	}
	if err := i.run(ctx, rt, key, tmp, argv, env); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if exists(dir) {
			return nil // cannot happen while we hold the lock, but is harmless
		}
		return fmt.Errorf("%w for %s: %w", ErrInstall, rt.Name, err)
	}
	return nil
}

// command returns the command line and environment of the installer of
// rt's dependency file in tmp: pip (into rt's library directory) or npm,
// with its download cache in the cache directory, and reg's configuration
// for it, if any, written into confDir (in place of the registry the
// environment names).
func (i *Installer) command(rt runtimes.Runtime, reg Registry, tmp, confDir string) (argv, env []string, err error) {
	env = append(os.Environ(), i.env...)
	if rt.Language == runtimes.Python {
		argv = []string{i.python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
			"--no-warn-script-location", "--target", rt.DepsLibDir(tmp), "-r", filepath.Join(tmp, rt.DepsFile())}
		env = append(env, "PIP_CACHE_DIR="+filepath.Join(i.cacheDir, ".pip-cache"))
		if reg.PipConf != "" {
			conf := filepath.Join(confDir, "pip.conf")
			if err := os.WriteFile(conf, []byte(reg.PipConf), 0o600); err != nil {
				return nil, nil, err
			}
			env = append(without(env, "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_FIND_LINKS"), "PIP_CONFIG_FILE="+conf)
		}
		return argv, env, nil
	}
	argv = []string{i.npm, "install", "--include=dev", "--no-audit", "--no-fund", "--no-update-notifier"}
	env = append(env, "npm_config_cache="+filepath.Join(i.cacheDir, ".npm-cache"))
	if reg.NPMRC != "" {
		conf := filepath.Join(confDir, ".npmrc")
		if err := os.WriteFile(conf, []byte(reg.NPMRC), 0o600); err != nil {
			return nil, nil, err
		}
		env = append(without(env, "npm_config_registry", "NPM_CONFIG_REGISTRY"), "npm_config_userconfig="+conf)
	}
	return argv, env, nil
}

// run runs the installer argv in dir with env, its output written to the
// progress writer, if any, line by line; the error wraps ErrInstall and
// carries the tail of the output. Only a bounded tail of the output is
// kept (keptOutput), and lines are passed on cut at maxLine.
func (i *Installer) run(ctx context.Context, rt runtimes.Runtime, key, dir string, argv, env []string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	out := &tailBuffer{max: keptOutput}
	var sink io.Writer = out
	what := "npm install"
	if rt.Language == runtimes.Python {
		what = "pip install"
	}
	lines := &lineWriter{w: io.Discard}
	if i.progress != nil {
		fmt.Fprintf(i.progress, "kfn: installing the %s dependencies %s with %s\n", rt.Name, key[:12], what)
		lines = &lineWriter{w: i.progress, prefix: "kfn: " + what + " | "}
		sink = io.MultiWriter(out, lines)
	}
	cmd.Stdout = sink
	cmd.Stderr = sink
	setProcessGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	lines.flush()
	if err != nil {
		failed := "failed after " + time.Since(start).Round(time.Millisecond).String()
		if ctx.Err() != nil {
			err = ctx.Err()
			if context.Cause(ctx) == errTimeout {
				failed = fmt.Sprintf("did not finish within %s (stopped)", i.timeout)
			}
		}
		return fmt.Errorf("%w for %s: %s %s: %w\n%s", ErrInstall, rt.Name, what, failed, err, tail(out.Bytes()))
	}
	if i.progress != nil {
		fmt.Fprintf(i.progress, "kfn: installed the %s dependencies %s in %s\n", rt.Name, key[:12], time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if len(t.buf)+len(p) > 2*t.max {
		// Slide the last max bytes to the front: each byte is copied at
		// most once per max bytes written.
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns the last max bytes written (fewer before that many were).
func (t *tailBuffer) Bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	return t.buf
}

// lineWriter writes whole lines, each with a prefix, to w. A line longer
// than maxLine is written cut at maxLine, once it gets there; the rest of
// it is dropped as it comes. Each byte is looked at once.
type lineWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
	cut    bool // the current line was written cut: drop it up to its newline
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		end := bytes.IndexByte(p, '\n')
		part := p
		if end >= 0 {
			part = p[:end]
		}
		if !l.cut {
			room := maxLine - len(l.buf)
			if len(part) > room {
				l.buf = append(l.buf, part[:room]...)
				l.emit(fmt.Sprintf(" [line cut at %d bytes]", maxLine))
				l.cut = true
			} else {
				l.buf = append(l.buf, part...)
			}
		}
		if end < 0 {
			break
		}
		if !l.cut {
			l.emit("")
		}
		l.buf, l.cut = l.buf[:0], false
		p = p[end+1:]
	}
	return n, nil
}

// emit writes the line in buf, if it is not blank, with suffix.
func (l *lineWriter) emit(suffix string) {
	line := strings.TrimRight(string(l.buf), "\r")
	if strings.TrimSpace(line) != "" {
		fmt.Fprintf(l.w, "%s%s%s\n", l.prefix, line, suffix)
	}
	l.buf = l.buf[:0]
}

// flush writes a last line without a newline.
func (l *lineWriter) flush() {
	if !l.cut {
		l.emit("")
	}
	l.buf, l.cut = nil, false
}

// without returns env without the named variables.
func without(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			if name == n {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

func tail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > maxOutput {
		b = append([]byte("...\n"), b[len(b)-maxOutput:]...)
	}
	return string(b)
}
