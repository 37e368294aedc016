// Command testsummary prints the output of `go test -json` (its standard
// input) as `go test` without -v would, and ends with what a reader of
// only the last lines of a long run needs: each failed test's own output
// again, without the platform dumps (test/singlenode's Describe, which a
// failed real-node test prints and which can be hundreds of lines long),
// so that the failure messages are the last thing printed.
//
// A test still running when its package ended (a timeout, a panic) is
// reported with the output it had printed so far, which `go test` without
// -v loses. The exit status is testsummary's own (0 unless its input could
// not be read): the Makefile's pipefail keeps go test's.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// DumpBegin and DumpEnd are the lines that enclose a platform dump
// (test/singlenode.DumpBegin and DumpEnd: a test keeps them equal).
const (
	DumpBegin = "<<<<< platform dump begins"
	DumpEnd   = ">>>>> platform dump ends"
)

// maxSummaryLines is how many lines of one failed test the summary keeps:
// the first and last halves, the middle left out.
const maxSummaryLines = 300

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
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
func run(in io.Reader, out io.Writer) error {
	var (
		tests  = map[string]*test{}
		order  []*test
		failed []*test
	)
	dec := json.NewDecoder(bufio.NewReader(in))
	for {
		var e event
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("read go test -json: %w", err)
		}
		if e.Test == "" {
			// The package's own lines: ok/FAIL, build errors, what
			// TestMain prints. "PASS" alone is -v's.
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		key := e.Package + "\x00" + top
		t := tests[key]
		if t == nil {
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
	if len(failed)+len(running) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\n=== testsummary: %d failed, %d unfinished; their output again, without platform dumps:\n", len(failed), len(running))
	for _, t := range append(failed, running...) {
		fmt.Fprintf(out, "=== %s (%s)\n%s", t.name, t.pkg, summary(t.out.String()))
	}
	return nil
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
