package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/bench/procstat"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

// program is one benchmark program and how the harness runs it.
type program struct {
	// name is the program's directory under bench/.
	name string
	// label tells apart several entries of one program (its name if empty).
	label string
	// full says the entry runs only in a full run, not under BENCH_QUICK.
	full bool
	// args are its flags for a full run, quick those under BENCH_QUICK.
	args, quick []string
	// reps, when > 0, caps the repetitions of this entry (points of a
	// scaling curve that are not also a headline figure run once, so that
	// a full run stays near an hour).
	reps int
}

// programs are the benchmarks `make bench` runs, in order; adding one is an
// entry here and a -figures flag in the program. A program whose directory
// does not exist (one still on another branch) is reported as not
// available instead of failing the run.
//
// The full settings keep a 3-repetition run near an hour on the shared
// 2-core machine; the largest parts are the real node's wakes (about 30
// minutes: 20 of each of 8 kinds, which issue 34 asks for), the event
// bridge's programs (about 12) and the controller (about 4).
var programs = []program{
	{name: "runtimes",
		args:  []string{"-rounds", "2", "-duration", "3s", "-warmup", "1s", "-latency", "10s", "-starts", "7"},
		quick: []string{"-rounds", "2", "-duration", "1s", "-warmup", "500ms", "-latency", "3s", "-starts", "3"}},
	{name: "eventbridge",
		args:  []string{"-rounds", "2", "-duration", "3s"},
		quick: []string{"-rounds", "1", "-duration", "2s"}},
	// What metrics and traces cost: kfn with them beside kfn without them.
	{name: "eventbridge", label: "eventbridge-observability",
		args:  []string{"-observability", "both", "-rounds", "5", "-duration", "2s"},
		quick: []string{"-observability", "both", "-rounds", "2", "-duration", "2s"}},
	{name: "eventbridge", label: "eventbridge-metrics", reps: 1,
		args:  []string{"-observability", "metrics", "-rounds", "5", "-duration", "2s"},
		quick: []string{"-observability", "metrics", "-rounds", "2", "-duration", "2s"}},
	{name: "eventbridge", label: "eventbridge-observability-sampled", reps: 1,
		args:  []string{"-observability", "both", "-sample", "0.1", "-rounds", "5", "-duration", "2s"},
		quick: []string{"-observability", "both", "-sample", "0.1", "-rounds", "2", "-duration", "2s"}},
	{name: "eventbridge", label: "eventbridge-10", reps: 1,
		args:  []string{"-subscriptions", "10", "-rounds", "1", "-duration", "3s"},
		quick: []string{"-subscriptions", "10", "-rounds", "1", "-duration", "2s"}},
	{name: "eventbridge", label: "eventbridge-100", reps: 1,
		args:  []string{"-subscriptions", "100", "-rounds", "1", "-duration", "3s"},
		quick: []string{"-subscriptions", "100", "-rounds", "1", "-duration", "2s"}},
	// Three rounds at 1,000: the target compares p99s, and the more turns
	// each pipeline has, the more evenly the machine's stalls (here the
	// disk, which NATS writes every consumer's state to) fall on all.
	{name: "eventbridge", label: "eventbridge-1000", reps: 1,
		args:  []string{"-subscriptions", "1000", "-rounds", "3", "-duration", "3s"},
		quick: []string{"-subscriptions", "1000", "-rounds", "1", "-duration", "2s"}},
	// At 2,000 too: one round there gave a p99 ratio of 0.14, 0.40 and 5.08
	// in three full runs.
	{name: "eventbridge", label: "eventbridge-2000", reps: 1, full: true,
		args: []string{"-subscriptions", "2000", "-rounds", "3", "-duration", "3s"}},
	// Two dispatcher processes beside one, and what a dispatcher process
	// costs per 1,000 idle Subscriptions over a whole pull expiry (30 s).
	{name: "eventbridge", label: "eventbridge-replicas", reps: 1,
		args:  []string{"-replicas", "-rounds", "3", "-duration", "3s"},
		quick: []string{"-replicas", "-rounds", "2", "-duration", "2s"}},
	// R3 streams on a 3-server NATS cluster (profile ha) beside R1 streams
	// on one server (profile small): publish and delivery throughput and
	// p99, in turns; and 3 partitions of R3 streams on a cluster of their
	// own beside one partition: the same figures, each server's share of
	// the events stored by the streams it leads, and each server's CPU per
	// event on a cluster of 3 processes.
	{name: "eventbridge", label: "eventbridge-r3", reps: 1,
		args:  []string{"-stream-replicas", "-rounds", "3", "-duration", "3s"},
		quick: []string{"-stream-replicas", "-rounds", "1", "-duration", "2s"}},
	// A hostile tenant beside a victim (test/hostile), against the
	// victim alone, in turns: the victim's publish and delivery p99, one
	// pair of rows per attack class (fan-out, many Subscriptions, slow sinks, failing sinks,
	// refused publishes, large events, redirects, reply storm, all at
	// once), each turn on a pipeline of its own, its NATS server in a
	// process of its own as in a cluster.
	{name: "eventbridge", label: "eventbridge-hostile", reps: 1,
		args:  []string{"-hostile", "-rounds", "4", "-duration", "3s"},
		quick: []string{"-hostile", "-rounds", "2", "-duration", "2s"}},
	// Delivery in order per partition key (1,000 keys) against the same
	// events unordered, in turns.
	{name: "eventbridge", label: "eventbridge-ordered", reps: 1,
		args:  []string{"-ordered", "1000", "-rounds", "3", "-duration", "2s"},
		quick: []string{"-ordered", "1000", "-rounds", "1", "-duration", "2s"}},
	{name: "eventbridge", label: "eventbridge-idle-1000", reps: 1,
		args:  []string{"-idle", "-subscriptions", "1000", "-duration", "30s"},
		quick: []string{"-idle", "-subscriptions", "1000", "-duration", "10s"}},
	{name: "controller", quick: []string{"-functions", "100"}},
	{name: "controller", label: "controller-100", reps: 1, full: true, args: []string{"-functions", "100"}},
	{name: "controller", label: "controller-5000", reps: 1, full: true, args: []string{"-functions", "5000", "-timeout", "15m"}},
	{name: "scaler",
		args:  []string{"-functions", "1000", "-trials", "200", "-window", "10s"},
		quick: []string{"-functions", "200", "-trials", "50", "-window", "5s"}},
	{name: "kfndev", args: []string{"-starts", "3"}, quick: []string{"-starts", "2"}},
	// The real node (root): 20 wakes from zero of each kind (by event and
	// by HTTP, Node.js and Python, on a new pod and by the warm pool,
	// without and with a dependency to install) and latency through a
	// Service, beside kfn dev in the same run; about an hour once the
	// cluster's binaries and images are built (make cluster builds them;
	// with -trials 3 it took 7 minutes, the wakes with a dependency
	// doubled the wakes of the 30-minute run before them).
	{name: "cluster", label: "cluster", reps: 1, full: true, args: []string{"-trials", "20"}},
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	quick := os.Getenv("BENCH_QUICK") == "1"
	reps := 3
	if quick {
		reps = 1
	}
	fs.IntVar(&reps, "reps", reps, "repetitions of each program (the median is reported)")
	out := fs.String("out", "BENCHMARKS.md", "the report to write")
	only := fs.String("only", "", "comma-separated programs or entries to run (default all: runtimes,eventbridge,controller,scaler,kfndev,cluster); the others' rows are kept from the run that measured them (bench/results/runs.json)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if reps < 1 {
		return errors.New("-reps must be at least 1")
	}
	selected, err := choose(*only)
	if err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		assets, err := exec.CommandContext(ctx, "hack/envtest-assets.sh").Output()
		if err != nil {
			return fmt.Errorf("hack/envtest-assets.sh (run from the repository root): %w", err)
		}
		os.Setenv("KUBEBUILDER_ASSETS", strings.TrimSpace(string(assets)))
	}
	dir, err := os.MkdirTemp("", "kfn-bench-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	m := describeMachine(ctx)
	m.Quick, m.Reps = quick, reps
	var runs []repetition
	ran := map[string]bool{}
	for _, p := range selected {
		label := p.label
		if label == "" {
			label = p.name
		}
		if quick && p.full {
			continue
		}
		ran[label] = true
		if _, err := os.Stat(filepath.Join("bench", p.name)); err != nil {
			fmt.Fprintf(os.Stderr, "bench/report: %s: not available (bench/%s does not exist in this checkout)\n", label, p.name)
			runs = append(runs, repetition{program: label, err: fmt.Sprintf("not available: bench/%s does not exist in this checkout", p.name)})
			continue
		}
		n := reps
		if p.reps > 0 {
			n = min(n, p.reps)
		}
		for i := 1; i <= n; i++ {
			file := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", label, i))
			flags := p.args
			if quick {
				flags = p.quick
			}
			fmt.Fprintf(os.Stderr, "bench/report: %s, repetition %d of %d: go run ./bench/%s %s\n", label, i, n, p.name, strings.Join(flags, " "))
			begin, cpu := time.Now(), readCPU()
			figs, err := runProgram(ctx, p.name, append(append([]string(nil), flags...), "-figures", file), file)
			r := repetition{program: label, rep: i, took: time.Since(begin), figures: figs, at: begin.UTC(), quick: quick, stolen: procstat.Stolen(cpu),
				command: strings.TrimSpace("go run ./bench/" + p.name + " " + strings.Join(flags, " "))}
			if err != nil {
				r.err = err.Error()
			}
			runs = append(runs, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	m.LoadAfter, m.Stolen = procstat.LoadAvg(), procstat.Stolen(m.cpu)
	saved := filepath.Join("bench", "results", "runs.json")
	if *only != "" {
		earlier, err := loadRuns(saved)
		if err != nil {
			return err
		}
		runs = merge(programs, ran, runs, earlier, quick)
	}
	if err := saveRuns(saved, runs); err != nil {
		return err
	}
	old, _ := os.ReadFile(*out) // the hand-written section survives
	section, err := renderCurves(runs, filepath.Join("bench", "results"))
	if err != nil {
		return err
	}
	doc := render(m, runs) + section + peers(string(old))
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	fmt.Fprintf(os.Stderr, "bench/report: wrote %s\n", *out)
	return nil
}

func choose(only string) ([]program, error) {
	if only == "" {
		return programs, nil
	}
	var out []program
	for _, name := range strings.Split(only, ",") {
		found := false
		for _, p := range programs {
			if p.name == strings.TrimSpace(name) || p.label == strings.TrimSpace(name) {
				out, found = append(out, p), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-only: no benchmark %q", name)
		}
	}
	return out, nil
}

// repetition is one run of one program.
type repetition struct {
	program string
	rep     int
	took    time.Duration
	figures []figures.Figure
	err     string
	// command is what ran, without the harness's -figures flag.
	command string
	// at is when the repetition started; quick whether it ran with the
	// short settings of BENCH_QUICK.
	at    time.Time
	quick bool
	// stolen is the share of the machine's CPU time the host of this
	// virtual machine took while the repetition ran ("12%"; "-" when
	// the kernel does not say; "" in runs saved before it was kept).
	stolen string
}

// readCPU reads the machine's CPU times, zero when they cannot be read
// (procstat.Stolen then says "-").
func readCPU() procstat.CPUTimes {
	c, _ := procstat.ReadCPUTimes()
	return c
}

// runProgram runs `go run ./bench/<name> args` with its output on stderr
// and returns the figures it appended to file.
func runProgram(ctx context.Context, name string, args []string, file string) ([]figures.Figure, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./bench/" + name}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go run ./bench/%s: %w", name, err)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("bench/%s wrote no figures: %w", name, err)
	}
	defer f.Close()
	return figures.Read(f)
}
