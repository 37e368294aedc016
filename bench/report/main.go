package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kfn-dev/kfn/bench/result"
)

// config is what one report run does.
type config struct {
	reps    int
	quick   bool
	out     string
	results string
	peers   string
	only    string
	timeout time.Duration
}

func main() {
	var c config
	quickEnv := os.Getenv("BENCH_QUICK")
	flag.IntVar(&c.reps, "reps", 0, "repetitions of the suite; the median is reported (0: 3, or 1 with -quick)")
	flag.BoolVar(&c.quick, "quick", quickEnv != "" && quickEnv != "0", "short measurements, for checking the harness (default from BENCH_QUICK)")
	flag.StringVar(&c.out, "out", "BENCHMARKS.md", "the report to write")
	flag.StringVar(&c.results, "results", "bench/results", "directory for the plots and the raw figures")
	flag.StringVar(&c.peers, "peers", "bench/peers.md", "hand-measured peers, copied into the report")
	flag.StringVar(&c.only, "only", "", "comma-separated benchmark names to run (default: all)")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "limit for one run of one benchmark")
	flag.Parse()
	if c.reps == 0 {
		c.reps = 3
		if c.quick {
			c.reps = 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

// rawFigure is a figure as stored in the results directory: which
// benchmark and repetition printed it.
type rawFigure struct {
	Benchmark string `json:"benchmark"`
	Rep       int    `json:"rep"`
	result.Figure
}

func run(ctx context.Context, c config) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the repository root (make bench)")
	}
	if c.reps < 1 {
		return fmt.Errorf("-reps %d: want >= 1", c.reps)
	}
	m := describeMachine(ctx)
	m.reps, m.quick = c.reps, c.quick
	statuses := make([]status, len(selected(c)))
	for i, b := range selected(c) {
		statuses[i].b = b
		if c.quick && b.fullOnly {
			statuses[i].skipped = "full run only"
		} else if _, err := os.Stat(b.dir); err != nil {
			statuses[i].skipped = "not available: " + b.dir + " does not exist in this checkout"
		}
	}
	var raw []rawFigure
	for rep := 1; rep <= c.reps; rep++ {
		for i := range statuses {
			s := &statuses[i]
			if s.skipped != "" || (s.b.reps > 0 && rep > s.b.reps) {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "== %s, repetition %d of %d: %s\n", s.b.name, rep, c.reps, s.b.commandLine(c.quick))
			t0 := time.Now()
			figs, err := runOne(ctx, s.b, c)
			s.elapsed += time.Since(t0)
			s.runs++
			if err != nil {
				fmt.Fprintf(os.Stderr, "== %s failed: %v\n", s.b.name, err)
				s.failed = append(s.failed, err.Error())
				continue
			}
			for _, f := range figs {
				raw = append(raw, rawFigure{Benchmark: s.b.name, Rep: rep, Figure: f})
			}
		}
	}
	m.loadAfter, m.elapsed = loadavg(), time.Since(m.started)

	if err := os.MkdirAll(c.results, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", c.results, err)
	}
	if err := writeRaw(filepath.Join(c.results, "figures.jsonl"), raw); err != nil {
		return err
	}
	figs := make([]result.Figure, len(raw))
	for i, r := range raw {
		figs[i] = r.Figure
	}
	aggs := summarise(figs)
	plots, err := plotCurves(aggs, c.results, filepath.Dir(c.out))
	if err != nil {
		return err
	}
	peers, err := os.ReadFile(c.peers)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read peers: %w", err)
	}
	var buf bytes.Buffer
	if err := render(&buf, report{machine: m, statuses: statuses, figures: aggs, plots: plots, peers: string(peers)}); err != nil {
		return err
	}
	if err := os.WriteFile(c.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	fmt.Fprintf(os.Stderr, "== wrote %s and %s/ in %s\n", c.out, c.results, m.elapsed.Round(time.Second))
	return nil
}

func selected(c config) []benchmark {
	if c.only == "" {
		return suite
	}
	want := map[string]bool{}
	for _, n := range strings.Split(c.only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []benchmark
	for _, b := range suite {
		if want[b.name] {
			out = append(out, b)
		}
	}
	return out
}

// runOne runs b once and returns the figures it printed. Its stderr, and
// stdout lines that are not figures, go to this process's stderr.
func runOne(ctx context.Context, b benchmark, c config) ([]result.Figure, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	argv := b.command(c.quick)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 30 * time.Second
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	var stdout bytes.Buffer
	prefix := "   [" + b.name + "] "
	var mu sync.Mutex
	cmd.Stdout = io.MultiWriter(&stdout, &prefixWriter{w: os.Stderr, prefix: prefix, skipJSON: true, mu: &mu})
	cmd.Stderr = &prefixWriter{w: os.Stderr, prefix: prefix, mu: &mu}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	figs, err := result.Parse(&stdout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("%s printed no figures", b.name)
	}
	return figs, nil
}

// prefixWriter writes whole lines with a prefix; skipJSON drops lines that
// are JSON objects (the figures, recorded elsewhere).
type prefixWriter struct {
	w        io.Writer
	prefix   string
	skipJSON bool
	mu       *sync.Mutex
	partial  []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := p.partial[:i]
		p.partial = p.partial[i+1:]
		if p.skipJSON && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			continue
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, line); err != nil {
			return 0, err
		}
	}
}

func writeRaw(path string, raw []rawFigure) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write raw figures: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range raw {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return fmt.Errorf("write raw figures: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write raw figures: %w", err)
	}
	return f.Close()
}
