package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/bench/figures"
)

// summary is one figure over every repetition that measured it.
type summary struct {
	group, name, unit, anchor string
	values, anchors           []float64
	// ratios are Value/AnchorValue of each repetition: both were measured
	// minutes apart at most, so their ratio carries less of the other
	// processes' load than a ratio of medians would.
	ratios []float64
	target figures.Target
}

// median and spread of xs (sorted copy); zero values for none.
func stats(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// summarize groups the figures of all runs by group and name, in the order
// they first appear.
func summarize(runs []repetition) []*summary {
	var out []*summary
	byKey := map[string]*summary{}
	for _, r := range runs {
		for _, f := range r.figures {
			k := f.Group + "\x00" + f.Name
			s, ok := byKey[k]
			if !ok {
				s = &summary{group: f.Group, name: f.Name, unit: f.Unit, anchor: f.Anchor, target: f.Target}
				byKey[k] = s
				out = append(out, s)
			}
			s.values = append(s.values, f.Value)
			if f.Anchor != "" {
				s.anchors = append(s.anchors, f.AnchorValue)
				if r := f.Ratio(); r != 0 {
					s.ratios = append(s.ratios, r)
				}
			}
		}
	}
	return out
}

// render writes BENCHMARKS.md.
func render(m machine, runs []repetition) string {
	var b strings.Builder
	b.WriteString("# kfn benchmarks\n\n")
	b.WriteString("Written by `make bench` (`go run ./bench/report`); do not edit by hand except the section\n")
	b.WriteString("\"Peers measured by hand\" at the end, which the harness keeps.\n\n")
	fmt.Fprintf(&b, "- date: %s (of this run; rows of programs it did not run are from the run the Runs table dates)\n", m.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- machine: %d CPUs, %s; load average %s before, %s after; CPU time taken by the host (steal) during the run: %s\n",
		m.CPUs, m.CPUModel, m.LoadBefore, m.LoadAfter, orDash(m.Stolen))
	var vs []string
	for _, v := range m.Versions {
		vs = append(vs, v[0]+" "+v[1])
	}
	fmt.Fprintf(&b, "- versions: %s\n", strings.Join(vs, ", "))
	mode := fmt.Sprintf("full run, %d repetitions of each program", m.Reps)
	if m.Quick {
		mode = fmt.Sprintf("BENCH_QUICK=1: short settings, %d repetition(s); check the harness with it, do not quote it", m.Reps)
	}
	fmt.Fprintf(&b, "- mode: %s\n\n", mode)
	b.WriteString("Each number is the median of the repetitions, with their range in brackets. The anchor of a\n")
	b.WriteString("figure is measured by the same program in the same repetition, so the ratio is what counts on\n")
	b.WriteString("a shared, noisy machine; absolute numbers move with the load of other processes. The ratio is\n")
	b.WriteString("the median of the repetitions' own ratios (kfn/anchor), with their range. The result compares\n")
	b.WriteString("the medians with the target of shared/DESIGN.md.\n\n")
	b.WriteString(conditions)

	sums := summarize(runs)
	var groups []string
	for _, s := range sums {
		if !slices.Contains(groups, s.group) {
			groups = append(groups, s.group)
		}
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "## %s\n\n", g)
		b.WriteString("| figure | kfn | anchor | ratio | target | result |\n|---|---|---|---|---|---|\n")
		for _, s := range sums {
			if s.group != g {
				continue
			}
			med, lo, hi := stats(s.values)
			kfn := fmt.Sprintf("%s %s", num(med), s.unit)
			if len(s.values) > 1 {
				kfn += fmt.Sprintf(" [%s–%s]", num(lo), num(hi))
			}
			anchor, ratio := "", ""
			rmed := 0.0
			if s.anchor != "" && len(s.anchors) > 0 {
				amed, alo, ahi := stats(s.anchors)
				anchor = fmt.Sprintf("%s: %s %s", s.anchor, num(amed), s.unit)
				if len(s.anchors) > 1 {
					anchor += fmt.Sprintf(" [%s–%s]", num(alo), num(ahi))
				}
			}
			if len(s.ratios) > 0 {
				var rlo, rhi float64
				rmed, rlo, rhi = stats(s.ratios)
				ratio = fmt.Sprintf("%.3g", rmed)
				if len(s.ratios) > 1 {
					ratio += fmt.Sprintf(" [%.3g–%.3g]", rlo, rhi)
				}
			}
			result := ""
			if s.target.Set() {
				result = "fail"
				if s.target.Met(med, rmed) {
					result = "pass"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.name, kfn, anchor, ratio, s.target.Text, result)
		}
		b.WriteString("\n")
	}

	b.WriteString("## Runs\n\n| program | repetition | started | took | CPU stolen | outcome | command |\n|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		outcome := fmt.Sprintf("%d figures", len(r.figures))
		switch {
		case strings.HasPrefix(r.err, "not available"):
			outcome = r.err
		case r.err != "":
			outcome = "error: " + strings.ReplaceAll(r.err, "|", "\\|")
		}
		command := ""
		if r.command != "" {
			command = "`" + r.command + "`"
		}
		rep := "-"
		if r.rep > 0 {
			rep = fmt.Sprint(r.rep)
		}
		started := "-"
		if !r.at.IsZero() {
			started = r.at.UTC().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.program, rep, started, r.took.Round(time.Second), orDash(r.stolen), outcome, command)
	}
	b.WriteString("\n")
	return b.String()
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// conditions says under what load the figures were taken.
const conditions = "Conditions: a machine of 2 cores shared with other developers, whose tests run while the\n" +
	"benchmarks do (see the load average above); every load generator runs on the same 2 cores as what\n" +
	"it measures. Absolute figures are therefore low and noisy, and targets of DESIGN.md stated in\n" +
	"absolute numbers (events/s, ms) are for a quiet machine; the ratios are the figures to compare.\n" +
	"The machine is a virtual one: its host runs other machines on the same cores and takes CPU time\n" +
	"from it when they are busy (steal; the Runs table gives the share each repetition lost). A\n" +
	"repetition that lost more than a few percent ran on a machine that was not quiet, whatever the\n" +
	"load average says: its pipelines had less CPU than they asked for, in bursts no turn evens out.\n\n"

// num prints a figure with the digits that mean something.
func num(x float64) string {
	switch {
	case x >= 1000:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.3g", x)
	}
}

// peersHeading starts the hand-written section of BENCHMARKS.md.
const peersHeading = "## Peers measured by hand"

// peers returns the hand-written section of an earlier report (from its
// heading to the end), or a heading with a note when there is none.
func peers(old string) string {
	if i := strings.Index(old, peersHeading); i >= 0 {
		return old[i:]
	}
	return peersHeading + "\n\nNone yet. Peers whose code may not be part of the harness (Kyma's runtimes, KEDA's\n" +
		"polling, Knative) are measured here by hand, beside kfn on the same machine, with the date, the\n" +
		"command and the method.\n"
}
