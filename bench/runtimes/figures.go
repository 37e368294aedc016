package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kfn-dev/kfn/bench/result"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/deps"
)

// depPackageJSON is the one dependency of the cold-start-with-dependency
// function: small, with no dependencies of its own.
const depPackageJSON = `{"dependencies":{"is-number":"7.0.0"}}`

// depColdStart is the cold start of a Node.js function with one npm
// dependency: kfn starts it from the dependency cache (installed once per
// dependency set, before the measurement); the anchor installs the
// dependency with npm at every start, as Kyma's buildless runtime does.
type depColdStart struct {
	kfn, npmEveryStart []time.Duration
}

func (d *depColdStart) print(out io.Writer) {
	fmt.Fprintf(out, "\ncold start with one npm dependency (is-number), %d starts\n", len(d.kfn))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "server\tmedian\tp90\ttarget\t\t")
	fmt.Fprintf(w, "npm install + kfn host (at every start)\t%s\t%s\t\t\t\n", ms(median(d.npmEveryStart)), ms(percentile(d.npmEveryStart, 90)))
	fmt.Fprintf(w, "kfn nodejs22 host, dependency cache\t%s\t%s\t< %s\t%s\t\n", ms(median(d.kfn)), ms(percentile(d.kfn, 90)),
		ms(150*time.Millisecond), verdict(median(d.kfn) < 150*time.Millisecond))
	w.Flush()
}

// measureDepColdStart installs the dependency once through package deps
// (untimed, as kfn does once per dependency set) and then times starts of
// the kfn host with it, and starts that run npm install first.
func measureDepColdStart(ctx context.Context, c config, work string) (*depColdStart, error) {
	node, err := realExecutable("node", "-p", "process.execPath")
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, fmt.Errorf("npm (use -deps=false without it): %w", err)
	}
	rt, _ := runtimes.Lookup("nodejs22")
	inst, err := deps.New(filepath.Join(work, "deps-cache"), deps.WithNPM(npm))
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	depsDir, err := inst.Ensure(ictx, rt, depPackageJSON, deps.Registry{})
	if err != nil {
		return nil, fmt.Errorf("install the benchmark's dependency: %w", err)
	}
	fnDir := filepath.Join(work, "fn-node-dep")
	hostDir, err := runtimes.WriteHost(filepath.Join(work, "host-dep"))
	if err != nil {
		return nil, err
	}
	withDeps := func(dir string) (target, error) {
		vars, err := rt.Env(runtimes.Config{FunctionName: "hello", Namespace: "bench", FunctionDir: fnDir, DepsDir: dir})
		if err != nil {
			return target{}, err
		}
		env := baseEnv()
		for _, v := range vars {
			env = append(env, v.Name+"="+v.Value)
		}
		argv := rt.Command(hostDir)
		argv[0] = node
		return target{name: "kfn nodejs22 host with a dependency", language: "nodejs", argv: argv, env: env,
			ready: "/healthz", portEnv: runtimes.EnvPort}, nil
	}
	t, err := withDeps(depsDir)
	if err != nil {
		return nil, err
	}
	res := &depColdStart{}
	if s, _, err := start(t, 20*time.Second); err == nil {
		s.stop()
	} else {
		return nil, err
	}
	for range c.starts {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s, d, err := start(t, 20*time.Second)
		if err != nil {
			return nil, err
		}
		if status, err := probe(s.addr, "/"); err != nil || status != 200 {
			s.stop()
			return nil, fmt.Errorf("function with a dependency answered %d, %v\n%s", status, err, s.out.String())
		}
		s.stop()
		res.kfn = append(res.kfn, d)
	}
	// npm install at every start: fewer starts, each takes seconds.
	for i := range max(1, c.starts/3) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		dir := filepath.Join(work, fmt.Sprintf("npm-every-start-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(depPackageJSON), 0o644); err != nil {
			return nil, err
		}
		t0 := time.Now()
		install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("npm install: %w: %s", err, out)
		}
		installed := time.Since(t0)
		t, err := withDeps(dir)
		if err != nil {
			return nil, err
		}
		s, d, err := start(t, 20*time.Second)
		if err != nil {
			return nil, err
		}
		s.stop()
		res.npmEveryStart = append(res.npmEveryStart, installed+d)
	}
	fmt.Fprintf(os.Stderr, "  start    %-28s median %s (npm install at every start: %s)\n", "with one dependency", median(res.kfn), median(res.npmEveryStart))
	return res, nil
}

// measurePeer measures a Node.js server started by hand (c.peer is
// NAME=HOST:PORT, answering GET / with 200) beside plain node:http and the
// kfn host: throughput rounds in rotating order, then latency in turns.
func measurePeer(ctx context.Context, c config, pairs []pair, out io.Writer, figures *result.Writer) error {
	name, addr, ok := strings.Cut(c.peer, "=")
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("-peer %q: want NAME=HOST:PORT", c.peer)
	}
	var p *pair
	for i := range pairs {
		if pairs[i].language == "nodejs" {
			p = &pairs[i]
		}
	}
	if p == nil {
		return fmt.Errorf("-peer needs the nodejs servers (not -only python)")
	}
	plain, _, err := start(p.anchor, 20*time.Second)
	if err != nil {
		return err
	}
	defer plain.stop()
	host, _, err := start(p.kfn, 20*time.Second)
	if err != nil {
		return err
	}
	defer host.stop()
	names := []string{p.anchor.name, p.kfn.name, name}
	addrs := []string{plain.addr, host.addr, addr}
	for i, a := range addrs {
		if _, err := throughput(a, c.conns, c.warmup); err != nil {
			return fmt.Errorf("warm up %s: %w", names[i], err)
		}
	}
	rps := make([][]float64, len(addrs))
	for round := range c.rounds {
		for k := range addrs {
			i := (k + round) % len(addrs)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r, err := throughput(addrs[i], c.conns, c.duration)
			if err != nil {
				return fmt.Errorf("throughput of %s: %w", names[i], err)
			}
			fmt.Fprintf(os.Stderr, "  round %d  %-28s %9.0f req/s\n", round+1, names[i], r)
			rps[i] = append(rps[i], r)
		}
	}
	ls, err := latencies(addrs, c.rate, c.latency)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	fmt.Fprintf(out, "\npeer %s beside plain node:http and the kfn host (%s, %d rounds of %s, %d connections; latency at %.0f req/s for %s)\n",
		name, addr, c.rounds, c.duration, c.conns, c.rate, c.latency)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "server\treq/s (median)\tvs plain\tp50\tp99\tmax\t")
	for i := range addrs {
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%s\t%s\t%s\t\n", names[i], medianFloat(rps[i]), pairedRatio(rps[i], rps[0]),
			ms(percentile(ls[i], 50)), ms(percentile(ls[i], 99)), ms(percentile(ls[i], 100)))
	}
	w.Flush()
	plainFig := &result.Anchor{Name: p.anchor.name, Value: medianFloat(rps[0])}
	for i, n := range names[1:] {
		i++
		if err := figures.Emit(result.Figure{Name: "peer/" + slug(n) + "/throughput", Unit: "req/s", Value: medianFloat(rps[i]),
			Anchor: plainFig, Ratio: pairedRatio(rps[i], rps[0])}); err != nil {
			return err
		}
		if err := figures.Emit(result.Figure{Name: "peer/" + slug(n) + "/latency-p99", Unit: "ms", Value: msf(percentile(ls[i], 99)),
			Anchor: &result.Anchor{Name: p.anchor.name, Value: msf(percentile(ls[0], 99))}}); err != nil {
			return err
		}
	}
	return nil
}

// emit writes the figures of the run for bench/report.
func emit(w *result.Writer, pairs []pair, results map[string]*Result, rep *Report, dep *depColdStart) error {
	var figs []result.Figure
	for _, p := range pairs {
		a, k := results[p.anchor.name], results[p.kfn.name]
		lang := p.language
		var floor []time.Duration
		for _, n := range rep.Interpreter[lang] {
			floor = append(floor, time.Duration(n))
		}
		interp := filepath.Base(p.interpreter[0]) + " " + strings.Join(p.interpreter[1:], " ")
		figs = append(figs,
			result.Figure{Name: "runtimes/" + lang + "/throughput", Unit: "req/s", Value: k.Median,
				Anchor: &result.Anchor{Name: a.Name, Value: a.Median}, Ratio: pairedRatio(k.Throughput, a.Throughput)},
			result.Figure{Name: "runtimes/" + lang + "/latency-p50", Unit: "ms", Value: msf(k.P50),
				Anchor: &result.Anchor{Name: a.Name, Value: msf(a.P50)}},
			result.Figure{Name: "runtimes/" + lang + "/latency-p99", Unit: "ms", Value: msf(k.P99),
				Anchor: &result.Anchor{Name: a.Name, Value: msf(a.P99)}},
			result.Figure{Name: "runtimes/" + lang + "/cold-start", Unit: "ms", Value: msf(k.ColdStart),
				Anchor: &result.Anchor{Name: interp + " (to exit)", Value: msf(median(floor))}},
		)
	}
	if dep != nil {
		figs = append(figs, result.Figure{Name: "runtimes/nodejs/cold-start-dependency", Unit: "ms", Value: msf(median(dep.kfn)),
			Anchor: &result.Anchor{Name: "npm install + start, at every start", Value: msf(median(dep.npmEveryStart))}})
	}
	for _, f := range figs {
		if err := w.Emit(f); err != nil {
			return err
		}
	}
	return nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// slug turns a server name into a figure name part: lower case, dashes.
func slug(s string) string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	return strings.Join(slices.Clip(f), "-")
}
