package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// PoolConfig tunes a Pool. Zero values mean the defaults.
type PoolConfig struct {
	// ReadyTimeout bounds the wait for a new process's health check; default 30s.
	ReadyTimeout time.Duration
	// DrainGrace is how long a stopped process may finish its in-flight
	// requests before it is killed; default 30s.
	DrainGrace time.Duration
	// DrainDelay is how long a replaced process keeps serving after it left
	// the endpoints, before it is asked to finish, so a caller that picked
	// it just before the switch still reaches it; default 500ms.
	DrainDelay time.Duration
	// RestartDelay is the first wait before a crashed process is restarted;
	// it doubles per crash in a row up to 10s. Default 100ms.
	RestartDelay time.Duration
	// OnChange is called, without locks held, whenever the set of ready
	// endpoints changes. It must not block for long.
	OnChange func()
	// OnStopped, when set, is called once, with the pool's name, when Stop
	// has stopped every process and written their output (or given up
	// waiting for the output after a few seconds): what the pool's name
	// keeps (kfn dev's lines of the function) can be forgotten. A pool of
	// the same name made since may already run.
	OnStopped func(name string)
}

func (o *PoolConfig) defaults() {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	if o.DrainGrace == 0 {
		o.DrainGrace = 30 * time.Second
	}
	if o.DrainDelay == 0 {
		o.DrainDelay = 500 * time.Millisecond
	}
	if o.RestartDelay == 0 {
		o.RestartDelay = 100 * time.Millisecond
	}
}

// ErrStopped is returned by a Pool's methods after Stop.
var ErrStopped = errors.New("pool stopped")

// Pool keeps the wanted number of ready processes of one function's current
// Spec. Its methods are safe for concurrent use; changes are applied one at
// a time.
type Pool struct {
	name  string
	out   *share  // where its processes' lines wait for the shared output
	notes *source // kfn's lines about the function
	opts  PoolConfig

	op     sync.Mutex     // serializes Update, Scale, Stop and restarts
	drains sync.WaitGroup // background drains, awaited by Stop

	mu        sync.Mutex // guards the fields below
	spec      *Spec
	version   int
	want      int
	instances []*instance
	next      int // instance number, for log prefixes
	crashes   int
	stopped   bool
	lastErr   error
}

type instance struct {
	proc     *Process
	version  int
	stopping bool
}

// NewPool makes an empty pool for the function called name (used as the log
// prefix). Process output goes to out, one prefixed line at a time, without
// its processes ever waiting for out: the function's lines wait in a queue
// of at most 1 MiB, past which they are dropped (and a line of the process
// says how many). Pools given the same SyncWriter take turns of about equal
// bytes at it, so one function's backlog does not delay another's lines.
func NewPool(name string, out io.Writer, opts PoolConfig) *Pool {
	opts.defaults()
	sh := syncWriterFor(out).newShare()
	return &Pool{name: name, out: sh, notes: sh.newSource(name + " | "), opts: opts}
}

// Endpoints returns host:port of every ready process of the current version.
func (p *Pool) Endpoints() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, in := range p.instances {
		if !in.stopping {
			out = append(out, in.proc.Addr())
		}
	}
	return out
}

// Replicas returns how many processes the pool wants.
func (p *Pool) Replicas() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.want
}

// LastError returns the last failure to start a version or a replica, nil
// after a later success.
func (p *Pool) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// PIDs returns the process ids of every process the pool runs, stopping
// ones included.
func (p *Pool) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.instances))
	for _, in := range p.instances {
		out = append(out, in.proc.PID())
	}
	return out
}

// Update makes spec the pool's version. With processes running, it starts
// as many of the new version, waits until all are ready, switches the
// endpoints to them, then drains the old ones; if a new process fails (a
// syntax error, a crash at start), the old version keeps serving and the
// error, with the process's output, is returned. With no process running,
// spec is only remembered for the next Scale.
func (p *Pool) Update(ctx context.Context, spec Spec) error {
	if err := p.lockRunning(); err != nil {
		return err
	}
	defer p.op.Unlock()
	n := len(p.instances)
	p.mu.Unlock()
	if n == 0 || p.Replicas() == 0 {
		p.mu.Lock()
		p.spec = &spec
		p.version++
		p.mu.Unlock()
		return nil
	}

	fresh, err := p.startReady(ctx, spec, p.Replicas())
	if err != nil {
		p.setErr(err)
		return err
	}
	p.mu.Lock()
	old := p.instances
	p.spec = &spec
	p.version++
	for _, in := range fresh {
		in.version = p.version
	}
	p.instances = fresh
	p.lastErr = nil
	p.crashes = 0
	p.mu.Unlock()
	p.changed()
	for _, in := range fresh {
		p.watch(in)
	}
	p.drain(old)
	return nil
}

// lockRunning takes the operation lock and then the state lock, which
// the caller releases; on a stopped pool it leaves both free and returns
// ErrStopped.
func (p *Pool) lockRunning() error {
	p.op.Lock()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.op.Unlock()
		return ErrStopped
	}
	return nil
}

// Scale runs n processes of the current version: it starts the missing ones
// and returns once they are ready, or drains the extra ones (newest first).
// Scale with n > 0 before any Update is an error.
func (p *Pool) Scale(ctx context.Context, n int) error {
	if n < 0 {
		return fmt.Errorf("scale %s: negative replicas %d", p.name, n)
	}
	if err := p.lockRunning(); err != nil {
		return err
	}
	defer p.op.Unlock()
	if p.spec == nil && n > 0 {
		p.mu.Unlock()
		return fmt.Errorf("scale %s: no version to run yet", p.name)
	}
	p.want = n
	have := len(p.instances)
	spec := p.spec
	p.mu.Unlock()
	return p.reconcile(ctx, have, n, spec)
}

func (p *Pool) reconcile(ctx context.Context, have, n int, spec *Spec) error {
	switch {
	case have < n:
		fresh, err := p.startReady(ctx, *spec, n-have)
		if err != nil {
			p.setErr(err)
			return err
		}
		p.mu.Lock()
		for _, in := range fresh {
			in.version = p.version
		}
		p.instances = append(p.instances, fresh...)
		p.lastErr = nil
		p.mu.Unlock()
		p.changed()
		for _, in := range fresh {
			p.watch(in)
		}
	case have > n:
		p.mu.Lock()
		extra := append([]*instance(nil), p.instances[n:]...)
		p.instances = p.instances[:n]
		p.mu.Unlock()
		p.changed()
		p.drain(extra)
	}
	return nil
}

// Stop drains every process and refuses later calls. It returns when all
// processes have exited and their output has been written, or a few
// seconds after they exited if the output takes nothing.
func (p *Pool) Stop() {
	if p.lockRunning() != nil {
		return // stopped before
	}
	defer p.op.Unlock()
	p.stopped = true
	all := p.instances
	p.instances = nil
	p.mu.Unlock()
	p.changed()
	p.drainWait(all)
	p.drains.Wait()
	p.out.flush(flushWait)
	if p.opts.OnStopped != nil {
		p.opts.OnStopped(p.name)
	}
}

// startReady starts n processes of spec and waits until all are ready; on
// any failure it stops them all and returns the first error.
func (p *Pool) startReady(ctx context.Context, spec Spec, n int) ([]*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadyTimeout)
	defer cancel()
	fresh := make([]*instance, 0, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		proc, err := start(spec, p.logSource())
		if err != nil {
			errs[i] = err
			continue
		}
		in := &instance{proc: proc}
		fresh = append(fresh, in)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = proc.WaitReady(ctx)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		p.drainWait(fresh)
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	return fresh, nil
}

// watch restarts a process that exits without being stopped.
func (p *Pool) watch(in *instance) {
	go func() {
		<-in.proc.Done()
		p.mu.Lock()
		if in.stopping || p.stopped {
			p.mu.Unlock()
			return
		}
		in.stopping = true // no longer an endpoint
		p.crashes++
		delay := p.opts.RestartDelay << min(p.crashes-1, 7)
		delay = min(delay, 10*time.Second)
		p.lastErr = fmt.Errorf("%s exited: %v", p.name, in.proc.ExitError())
		p.mu.Unlock()
		p.changed()
		p.note("kfn: process exited (%v); restarting in %s", in.proc.ExitError(), delay)
		time.Sleep(delay) // a crash-loop backoff, not a wait for a condition
		p.op.Lock()
		defer p.op.Unlock()
		p.mu.Lock()
		p.remove(in)
		if p.stopped {
			p.mu.Unlock()
			return
		}
		have, want, spec := len(p.instances), p.want, p.spec
		p.mu.Unlock()
		if err := p.reconcile(context.Background(), have, want, spec); err != nil {
			p.note("kfn: restart failed: %v", err)
		}
	}()
}

func (p *Pool) remove(gone *instance) {
	for i, in := range p.instances {
		if in == gone {
			p.instances = append(p.instances[:i], p.instances[i+1:]...)
			return
		}
	}
}

// drain stops processes that just left the endpoints, in the background:
// after the drain delay, each gets the drain grace to finish.
func (p *Pool) drain(old []*instance) {
	if len(old) == 0 {
		return
	}
	p.mu.Lock()
	for _, in := range old {
		in.stopping = true
	}
	p.mu.Unlock()
	p.drains.Add(1)
	go func() {
		defer p.drains.Done()
		time.Sleep(p.opts.DrainDelay) // endpoint propagation, as a preStop delay
		p.drainWait(old)
	}()
}

func (p *Pool) drainWait(old []*instance) {
	p.mu.Lock()
	for _, in := range old {
		in.stopping = true
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range old {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if in.proc.Stop(p.opts.DrainGrace) {
				p.note("kfn: pid %d did not finish within %s of SIGTERM; killed", in.proc.PID(), p.opts.DrainGrace)
			}
		}()
	}
	wg.Wait()
}

// ClearError forgets the last failure: the caller knows it no longer
// applies (the version that failed to start is not wanted any more).
func (p *Pool) ClearError() { p.setErr(nil) }

func (p *Pool) setErr(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
}

func (p *Pool) changed() {
	if p.opts.OnChange != nil {
		p.opts.OnChange()
	}
}

// logSource returns where the lines of the pool's next process go, each
// after the process's name.
func (p *Pool) logSource() *source {
	p.mu.Lock()
	p.next++
	prefix := fmt.Sprintf("%s-%d | ", p.name, p.next)
	p.mu.Unlock()
	return p.out.newSource(prefix)
}

// note writes one of kfn's lines about the function, after its name,
// without waiting for the output.
func (p *Pool) note(format string, args ...any) {
	p.notes.note(fmt.Sprintf(format, args...))
}
