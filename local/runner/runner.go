package runner

import (
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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/supervisor"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// Config is where the runner keeps its files and what functions are told.
type Config struct {
	// StateDir holds the host files, function sources and the dependency
	// cache (the project's .kfn directory). Required.
	StateDir string
	// DepsCacheDir holds installed dependency sets; default StateDir/deps.
	// Sharing it between projects shares installs.
	DepsCacheDir string
	// PublisherAddress is PUBLISHER_PROXY_ADDRESS of every function.
	PublisherAddress string
	// TraceCollectorEndpoint is TRACE_COLLECTOR_ENDPOINT; empty leaves it unset.
	TraceCollectorEndpoint string
	// Registry is the npm/pip configuration for dependency installs.
	Registry deps.Registry
	// Objects are the Secrets and ConfigMaps env valueFrom may refer to,
	// by namespace/name.
	Objects Objects
	// Pool tunes every function's process pool (OnChange is set by the runner).
	Pool supervisor.PoolConfig
	// OnChange is called when any function's ready endpoints change.
	OnChange func()
	// Log receives every function's output (prefixed) and the runner's notes.
	Log io.Writer
	// IdentityTokenFile, when set, gives the file of the token a
	// namespace's processes send with every event they emit
	// (runtimes.EnvIdentityTokenFile): the publisher holds each
	// namespace's events to its own bounds, as a pod's ServiceAccount
	// token does in a cluster (package local/senders). Nil: none; the
	// events are anonymous.
	IdentityTokenFile func(namespace string) (string, error)
	// InstallTimeout bounds one installation of a function's dependencies
	// (npm or pip, the wait for another installation of the same set
	// included); default deps.DefaultTimeout, 5 minutes. A function whose
	// installation takes longer does not start: its error says so.
	InstallTimeout time.Duration
	// StartWait bounds how long the first Apply waits for its functions to
	// be installed and started (kfn dev comes up then): one still being
	// installed or started goes on in the background. Zero means
	// DefaultStartWait; negative, until every one is done (each is bounded
	// by InstallTimeout and the pool's ReadyTimeout).
	StartWait time.Duration
	// ApplyWait bounds how long each later Apply waits likewise. Zero, the
	// default, is not at all: an edit is installed and started in the
	// background, and Changes counts the ones done since; negative waits
	// until every one is done.
	ApplyWait time.Duration
}

// DefaultStartWait is Config.StartWait's default.
const DefaultStartWait = 30 * time.Second

// parallelPerNamespace bounds how many functions of one namespace are
// installed or started at once. Namespaces do not wait for one another.
const parallelPerNamespace = 4

// ErrStopped is returned by Apply after Stop.
var ErrStopped = errors.New("runner stopped")

// Objects are ConfigMaps and Secrets a project defines, for valueFrom.
type Objects struct {
	ConfigMaps map[string]*corev1.ConfigMap
	Secrets    map[string]*corev1.Secret
}

// Function is one function the runner runs, as of one Apply: the runner
// never changes a Function it has handed out (a later Apply makes a new
// one), so its fields may be read without a lock; Pool is shared and safe
// for concurrent use.
type Function struct {
	// Function is the Function as last applied.
	Function *serverlessv1alpha2.Function
	// Plan is its plan.
	Plan plan.Plan
	// Pool runs its processes.
	Pool *supervisor.Pool
	// Warnings are what does not run locally as it would in a cluster.
	Warnings []string
	// Source is where the user wrote it (see SetSources); empty if unknown.
	Source   string
	specHash string
	// refused is set while the last edit's version failed to start and
	// the earlier one runs.
	refused bool
	// failedHash is the spec hash of the version that last failed to
	// start, failedErr its error: that version is not started again.
	failedHash string
	failedErr  error
	// idle is set while the function has no version running: its first
	// failed to start, so the next one that does is scaled up.
	idle   bool
	runDir string
}

// Error is the function's last failure to start (see supervisor.Pool's
// LastError), with the paths of the processes' own directories turned
// into the user's folder or manifest file.
func (f *Function) Error() error {
	err := f.Pool.LastError()
	if err == nil {
		return nil
	}
	return errors.New(userPaths(err.Error(), f.runDir, f.Source))
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

// Runner runs Functions as local processes, each from its Plan: the same
// plan a cluster's Deployment is built from.
//
// Each function is installed and started on its own (see Apply): one
// whose installation or start is slow, hangs or fails delays no other.
type Runner struct {
	cfg       Config
	installer *deps.Installer
	hostDir   string
	runDir    string // the processes' own directories: <StateDir>/run/<pid>
	sources   map[string]string

	// base is the context of the operations (installs and starts), ended
	// by Stop; work counts the operations and removals under way.
	base     context.Context
	stopBase context.CancelFunc
	work     sync.WaitGroup

	mu      sync.Mutex
	fns     map[string]*Function
	warns   map[string]bool // runtime version warnings given once
	slots   map[string]*slot
	sems    map[string]chan struct{} // per namespace: parallelPerNamespace
	applies int                      // Apply calls so far
	changes uint64                   // see Changes
	stopped bool
}

// slot is the application of one wanted function: at most one operation
// (install, then start) runs for it at a time, on the latest version Apply
// gave it; a newer version cancels the one under way.
type slot struct {
	key, namespace string

	// Guarded by Runner.mu.
	want    *serverlessv1alpha2.Function
	wantFP  string // fingerprint of want
	pending bool   // want is not applied yet
	running bool   // an operation goroutine runs
	idle    chan struct{}
	cancel  context.CancelFunc // the operation under way
	doneFP  string             // fingerprint of the version last applied
	err     error              // and its outcome
	late    bool               // no Apply waits for the operation under way
	removed bool
}

// New prepares the state directory and writes the runtime hosts into it.
func New(cfg Config) (*Runner, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("runner: a state directory is required")
	}
	// Processes run in their function's directory: every path they get
	// must be absolute.
	var err error
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("runner: state directory: %w", err)
	}
	if cfg.DepsCacheDir == "" {
		cfg.DepsCacheDir = filepath.Join(cfg.StateDir, "deps")
	}
	if cfg.DepsCacheDir, err = filepath.Abs(cfg.DepsCacheDir); err != nil {
		return nil, fmt.Errorf("runner: dependency cache: %w", err)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	hostDir, err := runtimes.WriteHost(filepath.Join(cfg.StateDir, "host"))
	if err != nil {
		return nil, fmt.Errorf("write the runtime hosts: %w", err)
	}
	if cfg.InstallTimeout == 0 {
		cfg.InstallTimeout = deps.DefaultTimeout
	}
	if cfg.StartWait == 0 {
		cfg.StartWait = DefaultStartWait
	}
	installer, err := deps.New(cfg.DepsCacheDir, deps.WithProgress(cfg.Log), deps.WithTimeout(cfg.InstallTimeout))
	if err != nil {
		return nil, fmt.Errorf("dependency cache: %w", err)
	}
	runRoot := filepath.Join(cfg.StateDir, "run")
	removeStaleRunDirs(runRoot)
	runDir := filepath.Join(runRoot, strconv.Itoa(os.Getpid()))
	base, stop := context.WithCancel(context.Background())
	return &Runner{cfg: cfg, installer: installer, hostDir: hostDir, runDir: runDir, base: base, stopBase: stop,
		fns: map[string]*Function{}, warns: map[string]bool{}, slots: map[string]*slot{}, sems: map[string]chan struct{}{}}, nil
}

// removeStaleRunDirs removes the function directories that earlier kfn dev
// processes, no longer running, left in root (killed before they could).
func removeStaleRunDirs(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(root, e.Name()))
	}
}

func processAlive(pid int) bool {
	proc, err := os.FindProcess(pid)
	return err == nil && proc.Signal(syscall.Signal(0)) == nil
}

// Key names a function: namespace/name.
func Key(namespace, name string) string { return namespace + "/" + name }

// Get returns the running function namespace/name, or nil.
func (r *Runner) Get(namespace, name string) *Function {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fns[Key(namespace, name)]
}

// Functions returns every running function, sorted by key.
func (r *Runner) Functions() []*Function {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Function, 0, len(r.fns))
	for _, f := range r.fns {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		return Key(out[i].Plan.Namespace, out[i].Plan.Name) < Key(out[j].Plan.Namespace, out[j].Plan.Name)
	})
	return out
}

// SetSources says where each function ("namespace/name") was written
// (project.Project.Sources), for messages; the next Apply uses it.
func (r *Runner) SetSources(sources map[string]string) {
	r.mu.Lock()
	r.sources = sources
	r.mu.Unlock()
}

// SetObjects replaces the Secrets and ConfigMaps valueFrom reads; the next
// Apply uses them.
func (r *Runner) SetObjects(o Objects) {
	r.mu.Lock()
	r.cfg.Objects = o
	r.mu.Unlock()
}

// Apply makes the runner run exactly fns: new ones start (with their
// fixed replicas or minReplicas), changed ones roll to their new version
// without dropping requests, and removed ones are drained. A function that
// cannot be prepared or whose new version does not start keeps its old
// version; its error is returned, the others still apply.
//
// Each function is installed and started by an operation of its own, in
// the background (at most parallelPerNamespace of a namespace at once; a
// newer version cancels the one under way), so one that is slow delays no
// other, nor Apply: the first Apply waits for them at most StartWait,
// later ones ApplyWait (by default not at all), or until ctx ends.
// Removed functions drain in the background too, within the same wait.
// The errors returned are those of the functions whose wanted version is
// done: one still being installed or started reports when done, to the
// next Apply (Changes tells when). A version that failed is not tried
// again until it changes (an edit of the Function, its source or the
// objects its env names).
func (r *Runner) Apply(ctx context.Context, fns []*serverlessv1alpha2.Function) []error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return []error{ErrStopped}
	}
	wait := r.cfg.ApplyWait
	if r.applies == 0 {
		wait = r.cfg.StartWait
	}
	r.applies++
	var order []*slot
	var started []chan struct{}
	want := map[string]*slot{}
	for _, fn := range fns {
		key := Key(fn.Namespace, fn.Name)
		fp := r.fingerprintLocked(key, fn)
		s := r.slots[key]
		if s == nil {
			s = &slot{key: key, namespace: fn.Namespace}
			r.slots[key] = s
		}
		if _, again := want[key]; !again {
			order = append(order, s)
		}
		want[key] = s
		if fp != "" && fp == s.wantFP {
			continue // applied, or being applied: nothing new
		}
		s.want, s.wantFP, s.pending, s.late = fn, fp, true, false
		if s.cancel != nil {
			s.cancel() // a newer version: the one under way is not wanted
		}
		if !s.running {
			s.running, s.idle = true, make(chan struct{})
			r.work.Add(1)
			go r.operate(s)
		}
		started = append(started, s.idle)
	}
	for key, s := range r.slots {
		if want[key] == nil {
			s.removed = true
			if s.cancel != nil {
				s.cancel()
			}
			delete(r.slots, key)
		}
	}
	var gone []*Function
	for key, f := range r.fns {
		if want[key] == nil {
			gone = append(gone, f)
			delete(r.fns, key)
		}
	}
	if len(gone) > 0 {
		removed := make(chan struct{})
		started = append(started, removed)
		r.work.Add(1)
		go func() {
			defer r.work.Done()
			defer close(removed)
			var wg sync.WaitGroup
			for _, f := range gone {
				wg.Go(f.Pool.Stop)
			}
			wg.Wait()
		}()
	}
	r.mu.Unlock()

	if wait != 0 {
		var deadline <-chan time.Time
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
	waiting:
		for _, done := range started {
			select {
			case <-done:
			case <-deadline:
				break waiting
			case <-ctx.Done():
				break waiting
			}
		}
	}

	var errs []error
	r.mu.Lock()
	for _, s := range order {
		switch {
		case s.doneFP == s.wantFP:
			if s.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.key, s.err))
			}
		case s.pending || s.running:
			if !s.late && wait != 0 {
				fmt.Fprintf(r.cfg.Log, "%s | kfn: still being installed or started; the other functions do not wait for it\n", s.key)
			}
			s.late = true
		}
	}
	r.mu.Unlock()
	return errs
}

// Changes counts the operations (installs and starts) that were done
// after the Apply that began them had returned: a caller that applies
// more than the functions, or reports Apply's errors, applies again when
// it changes.
func (r *Runner) Changes() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes
}

// operate applies s's wanted version until none is pending, each
// operation in turn on its own context; it ends when s is removed or the
// runner stopped.
func (r *Runner) operate(s *slot) {
	defer r.work.Done()
	r.mu.Lock()
	sem := r.sems[s.namespace]
	if sem == nil {
		sem = make(chan struct{}, parallelPerNamespace)
		r.sems[s.namespace] = sem
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		if !s.pending || s.removed || r.stopped {
			s.running = false
			close(s.idle)
			if s.late {
				r.changes++
				s.late = false
			}
			r.mu.Unlock()
			return
		}
		fn, fp := s.want, s.wantFP
		s.pending = false
		ctx, cancel := context.WithCancel(r.base)
		s.cancel = cancel
		r.mu.Unlock()

		var err error
		select {
		case sem <- struct{}{}:
			err = r.apply(ctx, s, fn)
			<-sem
		case <-ctx.Done():
			err = ctx.Err()
		}
		cancel()

		r.mu.Lock()
		s.cancel = nil
		if ctx.Err() == nil || s.wantFP == fp {
			// Cancelled for a newer version, the outcome is not this
			// version's to report.
			s.doneFP, s.err = fp, err
		}
		r.mu.Unlock()
	}
}

// fingerprintLocked is what identifies the version of fn that Apply
// wants: the Function, where it was written, and the ConfigMaps and
// Secrets its env names. Holding r.mu.
func (r *Runner) fingerprintLocked(key string, fn *serverlessv1alpha2.Function) string {
	h := sha256.New()
	b, err := json.Marshal(fn)
	if err != nil {
		return "" // no fingerprint: applied every time
	}
	h.Write(b)
	fmt.Fprintf(h, "\x00%s\x00", r.sources[key])
	for _, e := range fn.Spec.Env {
		if e.ValueFrom == nil {
			continue
		}
		var obj any
		switch {
		case e.ValueFrom.ConfigMapKeyRef != nil:
			obj = r.cfg.Objects.ConfigMaps[Key(fn.Namespace, e.ValueFrom.ConfigMapKeyRef.Name)]
		case e.ValueFrom.SecretKeyRef != nil:
			obj = r.cfg.Objects.Secrets[Key(fn.Namespace, e.ValueFrom.SecretKeyRef.Name)]
		default:
			continue
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return ""
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// apply installs and starts one version of a function: the operation of
// its slot s.
func (r *Runner) apply(ctx context.Context, s *slot, fn *serverlessv1alpha2.Function) error {
	key := s.key
	p, err := plan.For(fn, r.planConfig())
	if err != nil {
		return err
	}
	spec, warnings, err := r.spec(ctx, p)
	if err != nil {
		return err
	}
	hash := specHash(spec)

	r.mu.Lock()
	old, exists := r.fns[key]
	source := r.sources[key]
	r.mu.Unlock()
	// A Function others may hold (Functions, Get) is never changed:
	// its next state is a copy, published under the lock.
	var f Function
	if exists {
		f = *old
	} else {
		opts := r.cfg.Pool
		opts.OnChange = r.cfg.OnChange
		f = Function{Pool: supervisor.NewPool(key, r.cfg.Log, opts), runDir: spec.RunDir}
	}
	f.Source = source
	if exists && f.specHash == hash && !f.idle {
		f.Function, f.Plan, f.Warnings = fn, p, warnings
		if f.refused {
			// An edit that failed was undone: what runs is what is
			// wanted, and the failure no longer applies.
			f.refused, f.failedHash, f.failedErr = false, "", nil
			f.Pool.ClearError()
		}
		return r.publish(s, &f, exists)
	}
	if exists && f.failedHash == hash {
		// This version failed to start before: not again (each try may
		// take the ready timeout) until it changes.
		f.Function, f.Plan, f.Warnings = fn, p, warnings
		if err := r.publish(s, &f, exists); err != nil {
			return err
		}
		return f.failedErr
	}
	if err := f.Pool.Update(ctx, spec); err != nil {
		err = errors.New(userPaths(err.Error(), spec.RunDir, source))
		if exists {
			f.refused = !f.idle
		} else {
			// Keep it, not running, so its error shows and an edit can fix it.
			f.Function, f.Plan, f.Warnings = fn, p, warnings
		}
		if ctx.Err() == nil {
			f.failedHash, f.failedErr = hash, err
		}
		if perr := r.publish(s, &f, exists); perr != nil {
			return perr
		}
		return err
	}
	f.Function, f.Plan, f.Warnings, f.specHash, f.refused = fn, p, warnings, hash, false
	f.failedHash, f.failedErr = "", nil
	scale := !exists || f.idle
	f.idle = scale
	if err := r.publish(s, &f, exists); err != nil {
		return err
	}
	if scale {
		initial := p.Scaling.Replicas
		if p.Scaling.Autoscaled {
			initial = p.Scaling.MinReplicas
		}
		if err := f.Pool.Scale(ctx, int(initial)); err != nil {
			err = errors.New(userPaths(err.Error(), spec.RunDir, source))
			if ctx.Err() == nil {
				f.failedHash, f.failedErr = hash, err
				_ = r.publish(s, &f, true)
			}
			return err
		}
		f.idle = false
		if err := r.publish(s, &f, true); err != nil {
			return err
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(r.cfg.Log, "%s | kfn: warning: %s\n", key, w)
	}
	return nil
}

// publish makes f the function's state that Functions and Get return,
// unless its slot s was removed or the runner stopped since: then a pool
// that f made (it did not exist) is stopped, and the error says why.
func (r *Runner) publish(s *slot, f *Function, existed bool) error {
	r.mu.Lock()
	if s.removed || r.stopped {
		r.mu.Unlock()
		if !existed {
			f.Pool.Stop()
		}
		return fmt.Errorf("%s: removed while it was being applied", s.key)
	}
	copied := *f
	r.fns[s.key] = &copied
	r.mu.Unlock()
	return nil
}

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

// Stop ends the installs and starts under way, drains every function's
// processes and returns when all have exited. Apply does nothing after.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.stopBase()
	r.work.Wait()
	r.mu.Lock()
	all := r.fns
	r.fns = map[string]*Function{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Pool.Stop()
		}()
	}
	wg.Wait()
	_ = os.RemoveAll(r.runDir)
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
