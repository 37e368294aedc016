package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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

	// work counts the operations (installs and starts) and removals
	// under way.
	work sync.WaitGroup

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
	return &Runner{cfg: cfg, installer: installer, hostDir: hostDir, runDir: runDir,
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

// Stop ends the installs and starts under way, drains every function's
// processes and returns when all have exited. Apply does nothing after.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	for _, s := range r.slots {
		if s.cancel != nil {
			s.cancel()
		}
	}
	r.mu.Unlock()
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
