// Command testsummary prints the output of `go test -json` (its standard
// input) as `go test` without -v would, and ends with what a reader of
// only the last lines of a long run needs: each failed test's own output
// again, without the platform dumps (test/node/singlenode's Describe, which a
// failed real-node test prints and which can be hundreds of lines long),
// so that the failure messages are the last thing printed.
//
// A test still running when its package ended (a timeout, a panic) is
// reported with the output it had printed so far, which `go test` without
// -v loses.
//
// Flags:
//
//	-times       print each top-level test's result and time as it ends
//	             (the real node's scenarios: each says what it cost)
//	-budget D    fail when a package's tests took longer than D: a new
//	             scenario pays for its time instead of slowing make test
//	-state FILE  write "cached" to FILE when go test answered every package
//	             from its cache, "cold" otherwise (hack/phase.sh's table)
//
// The exit status is 1 when a package or a test failed (a build error, a
// failed or unfinished test) or a package is over its budget, 2 when the
// input could not be read, 0 otherwise: a pipe from go test fails with
// go test even where the shell that runs it has no pipefail.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// DumpBegin and DumpEnd are the lines that enclose a platform dump
// (test/node/singlenode.DumpBegin and DumpEnd: a test keeps them equal).
const (
	DumpBegin = "<<<<< platform dump begins"
	DumpEnd   = ">>>>> platform dump ends"
)

// maxSummaryLines is how many lines of one failed test the summary keeps:
// the first and last halves, the middle left out.
const maxSummaryLines = 300

func main() {
	var opts options
	flag.BoolVar(&opts.times, "times", false, "print each top-level test's result and time as it ends")
	flag.DurationVar(&opts.budget, "budget", 0, "fail when a package's tests take longer than this (0: no budget)")
	state := flag.String("state", "", "write cached or cold to this file: whether go test answered every package from its cache")
	flag.Parse()
	res, err := run(os.Stdin, os.Stdout, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if *state != "" {
		if err := os.WriteFile(*state, []byte(res.state()+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	if res.failed() {
		os.Exit(1)
	}
}

// options are testsummary's flags.
type options struct {
	times  bool
	budget time.Duration
}

// result is what a run found besides what it printed.
type result struct {
	// packages and cached count the packages that ended, and those
	// go test answered from its cache.
	packages, cached int
	// overBudget names the packages that took longer than the budget.
	overBudget []string
	// failedPackages counts the packages go test reported failed (their
	// tests, or their build); failedTests the top-level tests that failed
	// or had not ended when their package did.
	failedPackages, failedTests int
}

// failed reports whether the run failed: a package or test failed, or a
// package was over its budget.
func (r result) failed() bool {
	return r.failedPackages > 0 || r.failedTests > 0 || len(r.overBudget) > 0
}

// state is "cached" when every package that ended was answered from go
// test's cache, "cold" otherwise (and when no package ended).
func (r result) state() string {
	if r.packages > 0 && r.cached == r.packages {
		return "cached"
	}
	return "cold"
}

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// test is one top-level test's output so far.
type test struct {
	pkg, name string
	out       strings.Builder
	ended     bool
}

// run reads go test -json from in and writes the report to out.
func run(in io.Reader, out io.Writer, opts options) (result, error) {
	var (
		res    result
		tests  = map[string]*test{}
		order  []*test
		failed []*test
		// cachedPkgs are the packages whose ok line said (cached).
		cachedPkgs = map[string]bool{}
	)
	dec := json.NewDecoder(bufio.NewReader(in))
	for {
		var e event
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return res, fmt.Errorf("read go test -json: %w", err)
		}
		if e.Test == "" {
			// The package's own lines: ok/FAIL, build errors, what
			// TestMain prints. "PASS" alone is -v's.
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
			if strings.HasPrefix(e.Output, "ok ") && strings.HasSuffix(e.Output, "(cached)\n") {
				cachedPkgs[e.Package] = true
			}
			if e.Action == "fail" {
				res.failedPackages++
			}
			if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
				res.packages++
				if cachedPkgs[e.Package] {
					res.cached++
				}
				took := time.Duration(e.Elapsed * float64(time.Second))
				if opts.budget > 0 && took > opts.budget && !cachedPkgs[e.Package] {
					res.overBudget = append(res.overBudget, e.Package)
					fmt.Fprintf(out, "testsummary: %s took %s, over its budget of %s: make a scenario cheaper, or run it beside the others, before adding one\n",
						e.Package, took.Round(time.Second), opts.budget)
				}
			}
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		key := e.Package + "\x00" + top
		t := tests[key]
		if t == nil || t.ended && e.Action == "run" && !sub {
			// A test run again (-count, a rerun) is a test of its own:
			// its failure is not hidden behind an earlier pass.
			t = &test{pkg: e.Package, name: top}
			tests[key] = t
			order = append(order, t)
		}
		t.out.WriteString(e.Output)
		if sub || t.ended {
			continue
		}
		switch e.Action {
		case "pass", "skip":
			t.ended = true
			if opts.times {
				fmt.Fprintf(out, "--- %s: %s (%.1fs)\n", strings.ToUpper(e.Action), t.name, e.Elapsed)
			}
		case "fail":
			t.ended = true
			failed = append(failed, t)
			fmt.Fprint(out, withoutProgress(t.out.String()))
		}
	}
	var running []*test
	for _, t := range order {
		if !t.ended {
			running = append(running, t)
			fmt.Fprintf(out, "=== %s (%s) was still running when its package ended; its output so far:\n%s", t.name, t.pkg, withoutProgress(t.out.String()))
		}
	}
	res.failedTests = len(failed) + len(running)
	if res.failedTests == 0 {
		return res, nil
	}
	fmt.Fprintf(out, "\n=== testsummary: %d failed, %d unfinished; their output again, without platform dumps:\n", len(failed), len(running))
	for _, t := range append(failed, running...) {
		fmt.Fprintf(out, "=== %s (%s)\n%s", t.name, t.pkg, summary(t.out.String()))
	}
	return res, nil
}

// withoutProgress drops -v's progress lines (=== RUN, PAUSE, CONT, NAME),
// which go test without -v does not print.
func withoutProgress(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "=== RUN") || strings.HasPrefix(trimmed, "=== PAUSE") ||
			strings.HasPrefix(trimmed, "=== CONT") || strings.HasPrefix(trimmed, "=== NAME") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// summary is a failed test's output without progress lines and platform
// dumps, at most maxSummaryLines lines.
func summary(s string) string {
	var lines []string
	inDump := false
	for _, line := range strings.SplitAfter(withoutProgress(s), "\n") {
		switch {
		case strings.Contains(line, DumpBegin):
			inDump = true
			lines = append(lines, strings.Replace(line, DumpBegin, "(a platform dump, printed above)", 1))
		case strings.Contains(line, DumpEnd):
			inDump = false
		case !inDump && line != "":
			lines = append(lines, line)
		}
	}
	if len(lines) > maxSummaryLines {
		half := maxSummaryLines / 2
		left := len(lines) - 2*half
		lines = append(append(lines[:half:half], fmt.Sprintf("    ... (%d lines left out)\n", left)), lines[len(lines)-half:]...)
	}
	out := strings.Join(lines, "")
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}
