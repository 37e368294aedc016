package main

import "strings"

// benchmark is one program under bench/ that prints figures as JSON lines
// on stdout.
type benchmark struct {
	// name is how the report refers to it.
	name string
	// dir must exist for the benchmark to run; when it does not, the
	// benchmark is reported as not available (for example one still on
	// another branch).
	dir string
	// quick and full are the arguments after `go run ./<dir>`.
	quick, full []string
	// reps overrides the number of repetitions when > 0.
	reps int
	// fullOnly benchmarks are skipped in a quick run.
	fullOnly bool
}

// command is the argv that runs b.
func (b benchmark) command(quick bool) []string {
	args := b.full
	if quick {
		args = b.quick
	}
	return append([]string{"go", "run", "./" + b.dir}, args...)
}

// commandLine is command as one shell-like line, for the report.
func (b benchmark) commandLine(quick bool) string { return strings.Join(b.command(quick), " ") }

// suite is every benchmark of the project, in the order one repetition runs
// them. Durations are chosen so a full run with 3 repetitions stays under
// 15 minutes on 2 cores, and a quick run with 1 under 3.
var suite = []benchmark{
	{
		name:  "runtimes",
		dir:   "bench/runtimes",
		quick: []string{"-jsonl", "-rounds", "2", "-duration", "1s", "-warmup", "500ms", "-latency", "3s", "-starts", "3"},
		full:  []string{"-jsonl", "-rounds", "2", "-duration", "3s", "-warmup", "1s", "-latency", "10s", "-starts", "7"},
	},
	{
		name:  "eventbridge",
		dir:   "bench/eventbridge",
		quick: []string{"-jsonl", "-rounds", "1", "-duration", "1s", "-subscriptions", "1,10,100,1000"},
		full:  []string{"-jsonl", "-rounds", "1", "-duration", "3s", "-subscriptions", "1,10,100,1000"},
	},
	{
		name:  "controller",
		dir:   "bench/controller",
		quick: []string{"-jsonl", "-functions", "100"},
		full:  []string{"-jsonl", "-functions", "100,1000"},
	},
	{
		name:     "controller-5000",
		dir:      "bench/controller",
		full:     []string{"-jsonl", "-functions", "5000", "-timeout", "8m"},
		reps:     1,
		fullOnly: true,
	},
	{
		name:  "kfndev",
		dir:   "bench/kfndev",
		quick: []string{"-jsonl", "-starts", "2"},
		full:  []string{"-jsonl", "-starts", "5"},
	},
	{
		// Being written on another branch; it prints JSON lines.
		name: "scaler",
		dir:  "bench/scaler",
	},
}

// target is a figure the report knows: its title, the target from
// DESIGN.md and how to check it.
type target struct {
	name  string
	title string
	// text is the target as DESIGN.md states it; empty when it has none.
	text string
	// met reports whether the medians meet the target; nil when there is no target.
	met func(value, ratio float64) bool
	// missing says why the figure cannot be measured here, if it cannot.
	missing string
}

// targets lists the figures of the issue in the order of the report; a
// figure a benchmark printed that is not listed here is reported after
// them, without a target.
var targets = []target{
	{name: "eventbridge/throughput", title: "Event bridge throughput, 1 KiB events, vs bare pipeline",
		text: ">= 10,000 events/s and >= 60% of bare", met: func(v, r float64) bool { return v >= 10000 && r >= 0.6 }},
	{name: "eventbridge/throughput-vs-jetstream", title: "Event bridge throughput vs raw JetStream (no HTTP)"},
	{name: "eventbridge/latency-p50", title: "Event bridge latency p50 at 1,000 events/s"},
	{name: "eventbridge/latency-p99", title: "Event bridge latency p99 at 1,000 events/s, vs bare pipeline",
		text: "p99 < 5 ms", met: func(v, _ float64) bool { return v < 5 }},
	{name: "eventbridge/latency-p99-vs-jetstream", title: "Event bridge latency p99 at 1,000 events/s, vs raw JetStream",
		text: "p99 < 5 ms", met: func(v, _ float64) bool { return v < 5 }},
	{name: "scaler/activation-p50", title: "Activation latency p50 (first event -> StreamIsActive)"},
	{name: "scaler/activation-p99", title: "Activation latency p99 (first event -> StreamIsActive), vs KEDA polling",
		text: "p99 < 50 ms", met: func(v, _ float64) bool { return v < 50 }},
	{name: "scaler/cpu-1000", title: "Scaler CPU with 1,000 ScaledObjects"},
	{name: "scaler/memory-1000", title: "Scaler memory with 1,000 ScaledObjects"},
	{name: "runtimes/nodejs/throughput", title: "Node.js host max throughput, hello world, 64 connections",
		text: ">= 80% of plain node:http", met: func(_, r float64) bool { return r >= 0.8 }},
	{name: "runtimes/python/throughput", title: "Python host max throughput, hello world, 64 connections",
		text: ">= 80% of plain ThreadingHTTPServer", met: func(_, r float64) bool { return r >= 0.8 }},
	{name: "runtimes/nodejs/latency-p50", title: "Node.js host latency p50 at 50 req/s"},
	{name: "runtimes/nodejs/latency-p99", title: "Node.js host latency p99 at 50 req/s",
		text: "p99 < 2 ms", met: func(v, _ float64) bool { return v < 2 }},
	{name: "runtimes/python/latency-p50", title: "Python host latency p50 at 50 req/s"},
	{name: "runtimes/python/latency-p99", title: "Python host latency p99 at 50 req/s",
		text: "p99 < 2 ms", met: func(v, _ float64) bool { return v < 2 }},
	{name: "runtimes/nodejs/cold-start", title: "Node.js function cold start, no dependency (start -> /healthz 200)",
		text: "< 150 ms", met: func(v, _ float64) bool { return v < 150 }},
	{name: "runtimes/python/cold-start", title: "Python function cold start, no dependency (start -> /healthz 200)",
		text: "< 120 ms", met: func(v, _ float64) bool { return v < 120 }},
	{name: "runtimes/nodejs/cold-start-dependency", title: "Node.js function cold start, one npm dependency"},
	{name: "runtimes/python/cold-start-dependency", title: "Python function cold start, one dependency",
		missing: "not measurable here: PyPI cannot be reached, so no Python dependency can be installed"},
	{name: "controller/reconcile-1000", title: "Controller: 1,000 Functions -> Deployments and status",
		text: "< 60 s", met: func(v, _ float64) bool { return v < 60 }},
	{name: "controller/peak-rss-1000", title: "Controller peak RSS with 1,000 Functions",
		text: "< 150 MiB", met: func(v, _ float64) bool { return v < 150 }},
	{name: "kfndev/cold-start", title: "`kfn dev examples/shop` cold start to ready"},
}

// targetOf returns the target entry of a figure name.
func targetOf(name string) (target, bool) {
	for _, t := range targets {
		if t.name == name {
			return t, true
		}
	}
	return target{}, false
}
