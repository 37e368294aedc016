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
	// envtest says the program needs KUBEBUILDER_ASSETS.
	envtest bool
}

// programs are the benchmarks `make bench` runs, in order; adding one is an
// entry here and a -figures flag in the program.
var programs = []program{
	{name: "runtimes", quick: []string{"-duration", "1s", "-warmup", "500ms", "-rounds", "2", "-latency", "3s", "-starts", "3"}},
	{name: "eventbridge", quick: []string{"-duration", "2s", "-rounds", "1"}},
	{name: "eventbridge", label: "eventbridge-10", args: []string{"-subscriptions", "10"}, quick: []string{"-subscriptions", "10", "-duration", "2s", "-rounds", "1"}},
	{name: "eventbridge", label: "eventbridge-100", args: []string{"-subscriptions", "100"}, quick: []string{"-subscriptions", "100", "-duration", "2s", "-rounds", "1"}},
	{name: "eventbridge", label: "eventbridge-1000", args: []string{"-subscriptions", "1000"}, full: true},
	{name: "controller", envtest: true, quick: []string{"-functions", "100"}},
	{name: "controller", label: "controller-100", envtest: true, args: []string{"-functions", "100"}, full: true},
	{name: "controller", label: "controller-5000", envtest: true, args: []string{"-functions", "5000", "-timeout", "15m"}, full: true},
	{name: "scaler", envtest: true, quick: []string{"-functions", "200", "-trials", "50", "-window", "5s"}},
	{name: "kfndev", quick: []string{"-starts", "3"}},
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
	only := fs.String("only", "", "comma-separated programs to run (default all: runtimes,eventbridge,controller,scaler,kfndev)")
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
	for _, p := range selected {
		label := p.label
		if label == "" {
			label = p.name
		}
		if quick && p.full {
			continue
		}
		if _, err := os.Stat(filepath.Join("bench", p.name)); err != nil {
			runs = append(runs, repetition{program: label, err: "not available: " + err.Error()})
			continue
		}
		for i := 1; i <= reps; i++ {
			file := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", label, i))
			flags := p.args
			if quick {
				flags = p.quick
			}
			fmt.Fprintf(os.Stderr, "bench/report: %s, repetition %d of %d\n", label, i, reps)
			begin := time.Now()
			figs, err := runProgram(ctx, p.name, append(append([]string(nil), flags...), "-figures", file), file)
			r := repetition{program: label, rep: i, took: time.Since(begin), figures: figs}
			if err != nil {
				r.err = err.Error()
			}
			runs = append(runs, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	m.LoadAfter = procstat.LoadAvg()
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
