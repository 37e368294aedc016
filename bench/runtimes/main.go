package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/bench/procstat"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
)

//go:embed assets
var assets embed.FS

type config struct {
	duration time.Duration
	warmup   time.Duration
	rounds   int
	conns    int
	rate     float64
	latency  time.Duration
	starts   int
	only     string
	jsonOut  string
	figures  string
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "length of one throughput measurement")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "closed-loop load before a server's first measurement")
	flag.IntVar(&c.rounds, "rounds", 6, "throughput rounds (even: they alternate which server goes first)")
	flag.IntVar(&c.conns, "conns", 64, "keep-alive connections of the throughput load")
	flag.Float64Var(&c.rate, "rate", 50, "requests per second of the latency measurement")
	flag.DurationVar(&c.latency, "latency", 20*time.Second, "length of the latency measurement")
	flag.IntVar(&c.starts, "starts", 10, "cold starts per server; the median is reported")
	flag.StringVar(&c.only, "only", "", "measure one language only: nodejs or python")
	flag.StringVar(&c.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&c.figures, "figures", "", "also append the results as JSON lines (package bench/figures) to this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/runtimes:", err)
		os.Exit(1)
	}
}

// pair is a kfn host and the plain server it is compared with.
type pair struct {
	language    string
	anchor, kfn target
	// interpreter runs the language's do-nothing program, the floor of any
	// cold start.
	interpreter []string
	// targets from DESIGN.md
	minRatio     float64
	maxColdStart time.Duration
	// withDep, when set, is the kfn host serving a function with one
	// dependency installed (Node.js only: PyPI is out of reach here); it is
	// measured for cold start only.
	withDep *target
}

// Result is one server's figures.
type Result struct {
	Name         string        `json:"name"`             // server, e.g. "kfn nodejs22 host"
	Language     string        `json:"language"`         // nodejs or python
	Anchor       bool          `json:"anchor"`           // a plain server, not a kfn host
	Throughput   []float64     `json:"throughputRounds"` // req/s of each round
	Median       float64       `json:"throughputMedian"` // median of Throughput
	P50          time.Duration `json:"latencyP50"`       // at the fixed rate
	P99          time.Duration `json:"latencyP99"`       // at the fixed rate
	Max          time.Duration `json:"latencyMax"`       // at the fixed rate
	ColdStart    time.Duration `json:"coldStartMedian"`  // process start to first 200
	ColdStartP90 time.Duration `json:"coldStartP90"`     // process start to first 200
}

// Report is everything one run measured.
type Report struct {
	Started     time.Time          `json:"started"`               // when the run began
	CPUs        int                `json:"cpus"`                  // CPUs of the machine
	LoadBefore  string             `json:"loadavgBefore"`         // /proc/loadavg at the start
	LoadAfter   string             `json:"loadavgAfter"`          // /proc/loadavg at the end
	Versions    map[string]string  `json:"versions"`              // host, node, python versions
	Results     []*Result          `json:"results"`               // one per server
	Interpreter map[string][]int64 `json:"interpreterStartNanos"` // bare interpreter start to exit, per language
}

func run(ctx context.Context, c config, out io.Writer) error {
	work, err := os.MkdirTemp("", "kfn-bench-runtimes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	pairs, versions, err := prepare(c, work)
	if err != nil {
		return err
	}
	rep := &Report{Started: time.Now(), CPUs: runtime.NumCPU(), LoadBefore: procstat.LoadAvg(), Versions: versions,
		Interpreter: map[string][]int64{}}
	results := map[string]*Result{}
	for _, p := range pairs {
		for _, t := range []target{p.anchor, p.kfn} {
			r := &Result{Name: t.name, Language: t.language, Anchor: t.anchor}
			results[t.name] = r
			rep.Results = append(rep.Results, r)
		}
	}
	fmt.Fprintf(os.Stderr, "bench/runtimes: %d CPUs, load %s; %d rounds of %s, %d connections\n",
		rep.CPUs, rep.LoadBefore, c.rounds, c.duration, c.conns)

	if err := measureServers(ctx, c, pairs, results); err != nil {
		return err
	}
	if err := measureColdStarts(ctx, c, pairs, results, rep); err != nil {
		return err
	}
	rep.LoadAfter = procstat.LoadAvg()
	print(out, c, pairs, results, rep)
	if err := figures.Append(c.figures, runtimeFigures(c, pairs, results)...); err != nil {
		return err
	}
	if c.jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", c.jsonOut, err)
		}
	}
	return nil
}

// prepare writes the host files, the hello-world functions and the anchors
// into work and returns the pairs to measure.
func prepare(c config, work string) ([]pair, map[string]string, error) {
	hostDir, err := runtimes.WriteHost(filepath.Join(work, "host"))
	if err != nil {
		return nil, nil, err
	}
	for _, name := range []string{"plain_node.js", "plain_python.py", "handler.js", "handler.py"} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			return nil, nil, err
		}
		dir := work
		switch filepath.Ext(name) {
		case ".js":
			if name == "handler.js" {
				dir = filepath.Join(work, "fn-node")
			}
		case ".py":
			if name == "handler.py" {
				dir = filepath.Join(work, "fn-python")
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, nil, err
		}
	}
	env := baseEnv()
	versions := map[string]string{"host": runtimes.HostVersion()}
	var pairs []pair
	if c.only == "" || c.only == "nodejs" {
		node, err := realExecutable("node", "-p", "process.execPath")
		if err != nil {
			return nil, nil, fmt.Errorf("node: %w", err)
		}
		versions["node"] = version(node, "--version")
		rt, _ := runtimes.Lookup("nodejs22")
		p, err := kfnPair(rt, node, hostDir, filepath.Join(work, "fn-node"), "", env)
		if err != nil {
			return nil, nil, err
		}
		p.anchor = target{name: "plain node:http", language: "nodejs", anchor: true,
			argv: []string{node, filepath.Join(work, "plain_node.js")}, env: env, ready: "/", portEnv: "PORT"}
		p.interpreter = []string{node, "-e", "0"}
		p.minRatio, p.maxColdStart = 0.8, 150*time.Millisecond
		if dep, err := nodeWithDependency(rt, node, hostDir, work, env); err != nil {
			fmt.Fprintf(os.Stderr, "bench/runtimes: no cold start with a dependency: %v\n", err)
		} else {
			p.withDep = &dep
		}
		pairs = append(pairs, p)
	}
	if c.only == "" || c.only == "python" {
		python, err := realExecutable("python3", "-c", "import sys; print(sys.executable)")
		if err != nil {
			return nil, nil, fmt.Errorf("python3: %w", err)
		}
		versions["python"] = version(python, "--version")
		rt, _ := runtimes.Lookup("python312")
		p, err := kfnPair(rt, python, hostDir, filepath.Join(work, "fn-python"), "", env)
		if err != nil {
			return nil, nil, err
		}
		p.anchor = target{name: "plain ThreadingHTTPServer", language: "python", anchor: true,
			argv: []string{python, filepath.Join(work, "plain_python.py")}, env: env, ready: "/", portEnv: "PORT"}
		p.interpreter = []string{python, "-c", "0"}
		p.minRatio, p.maxColdStart = 0.8, 120*time.Millisecond
		pairs = append(pairs, p)
	}
	if len(pairs) == 0 {
		return nil, nil, fmt.Errorf("-only %q: want nodejs or python", c.only)
	}
	return pairs, versions, nil
}

func kfnPair(rt runtimes.Runtime, interpreter, hostDir, fnDir, depsDir string, env []string) (pair, error) {
	vars, err := rt.Env(runtimes.Config{FunctionName: "hello", Namespace: "bench", FunctionDir: fnDir, DepsDir: depsDir})
	if err != nil {
		return pair{}, err
	}
	e := append([]string(nil), env...)
	for _, v := range vars {
		e = append(e, v.Name+"="+v.Value)
	}
	argv := rt.Command(hostDir)
	argv[0] = interpreter
	return pair{language: string(rt.Language), kfn: target{
		name: "kfn " + rt.Name + " host", language: string(rt.Language), argv: argv, env: e,
		ready: "/healthz", portEnv: runtimes.EnvPort,
	}}, nil
}

// depPackage is the one dependency of the "with a dependency" function.
const depPackage = `{"name":"hello","dependencies":{"lodash":"4.17.21"}}`

// nodeWithDependency installs lodash from the npm registry into a
// dependency directory (as kfn dev and the controller's install step do)
// and returns the kfn host serving a handler that requires it.
func nodeWithDependency(rt runtimes.Runtime, node, hostDir, work string, env []string) (target, error) {
	fnDir := filepath.Join(work, "fn-node-dep")
	if err := os.MkdirAll(fnDir, 0o755); err != nil {
		return target{}, err
	}
	handler := "const _ = require('lodash');\nmodule.exports = { main: () => _.join(['hello', 'world'], ' ') };\n"
	if err := os.WriteFile(filepath.Join(fnDir, "handler.js"), []byte(handler), 0o644); err != nil {
		return target{}, err
	}
	if err := os.WriteFile(filepath.Join(fnDir, "package.json"), []byte(depPackage), 0o644); err != nil {
		return target{}, err
	}
	inst, err := deps.New(filepath.Join(work, "deps"))
	if err != nil {
		return target{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ctx, rt, depPackage, deps.Registry{})
	if err != nil {
		return target{}, fmt.Errorf("install lodash: %w", err)
	}
	p, err := kfnPair(rt, node, hostDir, fnDir, depsDir, env)
	if err != nil {
		return target{}, err
	}
	t := p.kfn
	t.name = "kfn " + rt.Name + " host, one dependency"
	return t, nil
}

func version(exe, flag string) string {
	out, err := runToExitOutput(exe, flag)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(out)
}

// measureServers starts every server once and measures throughput (in
// alternating order, several rounds) and latency.
func measureServers(ctx context.Context, c config, pairs []pair, results map[string]*Result) error {
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	byName := map[string]*server{}
	for _, p := range pairs {
		for _, t := range []target{p.anchor, p.kfn} {
			s, _, err := start(t, 20*time.Second)
			if err != nil {
				return err
			}
			servers = append(servers, s)
			byName[t.name] = s
			if _, err := throughput(s.addr, c.conns, c.warmup); err != nil {
				return fmt.Errorf("warm up %s: %w", t.name, err)
			}
		}
	}
	for round := range c.rounds {
		for _, p := range pairs {
			order := []target{p.anchor, p.kfn}
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				rps, err := throughput(byName[t.name].addr, c.conns, c.duration)
				if err != nil {
					return fmt.Errorf("throughput of %s: %w", t.name, err)
				}
				fmt.Fprintf(os.Stderr, "  round %d  %-28s %9.0f req/s\n", round+1, t.name, rps)
				results[t.name].Throughput = append(results[t.name].Throughput, rps)
			}
		}
	}
	for _, r := range results {
		r.Median = medianFloat(r.Throughput)
	}
	for _, p := range pairs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ts := []target{p.anchor, p.kfn}
		ls, err := latencies([]string{byName[p.anchor.name].addr, byName[p.kfn.name].addr}, c.rate, c.latency)
		if err != nil {
			return fmt.Errorf("latency of %s and %s: %w", p.anchor.name, p.kfn.name, err)
		}
		for i, t := range ts {
			r := results[t.name]
			r.P50, r.P99, r.Max = percentile(ls[i], 50), percentile(ls[i], 99), percentile(ls[i], 100)
			fmt.Fprintf(os.Stderr, "  latency  %-28s p50 %s p99 %s\n", t.name, r.P50, r.P99)
		}
	}
	return nil
}

// measureColdStarts times process start to the first 200 of each server,
// and the bare interpreter's start to exit. One untimed start first lets
// Python cache the host's bytecode, as a runtime image has it precompiled.
func measureColdStarts(ctx context.Context, c config, pairs []pair, results map[string]*Result, rep *Report) error {
	for _, p := range pairs {
		var floor []time.Duration
		for range c.starts {
			d, err := runToExit(p.interpreter, p.kfn.env)
			if err != nil {
				return err
			}
			floor = append(floor, d)
			rep.Interpreter[p.language] = append(rep.Interpreter[p.language], int64(d))
		}
		fmt.Fprintf(os.Stderr, "  start    %-28s median %s\n", filepath.Base(p.interpreter[0])+" "+strings.Join(p.interpreter[1:], " "), median(floor))
		targets := []target{p.anchor, p.kfn}
		if p.withDep != nil {
			targets = append(targets, *p.withDep)
			if _, ok := results[p.withDep.name]; !ok {
				r := &Result{Name: p.withDep.name, Language: p.language}
				results[p.withDep.name] = r
				rep.Results = append(rep.Results, r)
			}
		}
		for _, t := range targets {
			if s, _, err := start(t, 20*time.Second); err == nil {
				s.stop()
			} else {
				return err
			}
			var ds []time.Duration
			for range c.starts {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s, d, err := start(t, 20*time.Second)
				if err != nil {
					return err
				}
				s.stop()
				ds = append(ds, d)
			}
			r := results[t.name]
			r.ColdStart, r.ColdStartP90 = median(ds), percentile(ds, 90)
			fmt.Fprintf(os.Stderr, "  start    %-28s median %s\n", t.name, r.ColdStart)
		}
	}
	return nil
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 50) }

// pairedRatio is the geometric mean over rounds of kfn[i]/anchor[i]. The
// rounds alternate which server goes first, so with an even number of
// rounds a bias towards the first (or second) of a pair cancels out.
func pairedRatio(kfn, anchor []float64) float64 {
	sum, n := 0.0, 0
	for i := range min(len(kfn), len(anchor)) {
		if anchor[i] > 0 && kfn[i] > 0 {
			sum += math.Log(kfn[i] / anchor[i])
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return math.Exp(sum / float64(n))
}

func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

func print(out io.Writer, c config, pairs []pair, results map[string]*Result, rep *Report) {
	fmt.Fprintf(out, "kfn runtime hosts vs plain servers: %d CPUs, loadavg %s -> %s\n", rep.CPUs, rep.LoadBefore, rep.LoadAfter)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range rep.Versions {
			if !yield(k) {
				return
			}
		}
	})
	var vs []string
	for _, k := range keys {
		vs = append(vs, k+" "+rep.Versions[k])
	}
	fmt.Fprintf(out, "versions: %s\n\n", strings.Join(vs, ", "))

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "throughput: hello world, keep-alive, %d connections, %d rounds of %s; req/s is the median,\n", c.conns, c.rounds, c.duration)
	fmt.Fprintf(out, "ratio the geometric mean of the rounds' kfn/plain ratios (each round measures both back to back,\n")
	fmt.Fprintf(out, "alternating which goes first)\n")
	fmt.Fprintln(w, "server\treq/s\tratio\ttarget\t\t")
	for _, p := range pairs {
		a, k := results[p.anchor.name], results[p.kfn.name]
		ratio := pairedRatio(k.Throughput, a.Throughput)
		fmt.Fprintf(w, "%s\t%.0f\t\t\t\t\n", a.Name, a.Median)
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t>= %.2f\t%s\t\n", k.Name, k.Median, ratio, p.minRatio, verdict(ratio >= p.minRatio))
	}
	w.Flush()

	fmt.Fprintf(out, "\nlatency: %.0f req/s each for %s on one keep-alive connection per server, servers of a language in turns\n", c.rate, c.latency)
	fmt.Fprintln(w, "server\tp50\tp99\tmax\ttarget\t\t")
	for _, p := range pairs {
		for _, r := range []*Result{results[p.anchor.name], results[p.kfn.name]} {
			target, v := "", ""
			if !r.Anchor {
				target, v = "p99 < 2 ms", verdict(r.P99 < 2*time.Millisecond)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, ms(r.P50), ms(r.P99), ms(r.Max), target, v)
		}
	}
	w.Flush()

	fmt.Fprintf(out, "\ncold start: process start to first 200 (/healthz for kfn), %d starts\n", c.starts)
	fmt.Fprintln(w, "server\tmedian\tp90\ttarget\t\t")
	for _, p := range pairs {
		var floor []time.Duration
		for _, n := range rep.Interpreter[p.language] {
			floor = append(floor, time.Duration(n))
		}
		fmt.Fprintf(w, "%s %s (to exit)\t%s\t%s\t\t\t\n", filepath.Base(p.interpreter[0]), strings.Join(p.interpreter[1:], " "), ms(median(floor)), ms(percentile(floor, 90)))
		a, k := results[p.anchor.name], results[p.kfn.name]
		fmt.Fprintf(w, "%s\t%s\t%s\t\t\t\n", a.Name, ms(a.ColdStart), ms(a.ColdStartP90))
		fmt.Fprintf(w, "%s\t%s\t%s\t< %s\t%s\t\n", k.Name, ms(k.ColdStart), ms(k.ColdStartP90),
			ms(p.maxColdStart), verdict(k.ColdStart < p.maxColdStart))
		if p.withDep != nil {
			d := results[p.withDep.name]
			fmt.Fprintf(w, "%s\t%s\t%s\t\t\t\n", d.Name, ms(d.ColdStart), ms(d.ColdStartP90))
		}
	}
	w.Flush()
}

// runtimeFigures are the results in package figures' form: per language,
// throughput and 50 req/s latency against the plain server, and cold start
// against the plain server's.
func runtimeFigures(c config, pairs []pair, results map[string]*Result) []figures.Figure {
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var out []figures.Figure
	for _, p := range pairs {
		a, k := results[p.anchor.name], results[p.kfn.name]
		group := "runtime " + p.language
		out = append(out,
			figures.Figure{Group: group, Name: fmt.Sprintf("hello world max throughput, %d connections", c.conns), Unit: "req/s",
				Value: k.Median, Anchor: a.Name, AnchorValue: a.Median,
				Target: figures.Target{MinRatio: p.minRatio, Text: fmt.Sprintf(">= %.0f%% of %s", 100*p.minRatio, a.Name)}},
			figures.Figure{Group: group, Name: fmt.Sprintf("p50 latency at %.0f req/s", c.rate), Unit: "ms",
				Value: msf(k.P50), Anchor: a.Name, AnchorValue: msf(a.P50)},
			figures.Figure{Group: group, Name: fmt.Sprintf("p99 latency at %.0f req/s", c.rate), Unit: "ms",
				Value: msf(k.P99), Anchor: a.Name, AnchorValue: msf(a.P99), Target: figures.Target{Max: 2, Text: "< 2 ms"}},
			figures.Figure{Group: group, Name: "cold start to first /healthz 200", Unit: "ms",
				Value: msf(k.ColdStart), Anchor: a.Name, AnchorValue: msf(a.ColdStart),
				Target: figures.Target{Max: msf(p.maxColdStart), Text: fmt.Sprintf("< %.0f ms", msf(p.maxColdStart))}},
		)
		if p.withDep != nil {
			d := results[p.withDep.name]
			out = append(out, figures.Figure{Group: group, Name: "cold start with one dependency (lodash) to first /healthz 200", Unit: "ms",
				Value: msf(d.ColdStart), Anchor: k.Name + " without dependencies", AnchorValue: msf(k.ColdStart)})
		}
	}
	return out
}

var errNoOutput = errors.New("no output")

func runToExitOutput(exe, flag string) (string, error) {
	b, err := execOutput(exe, flag)
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", errNoOutput
	}
	return string(b), nil
}
