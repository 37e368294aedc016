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
	target                    figures.Target
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
	fmt.Fprintf(&b, "- date: %s\n", m.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- machine: %d CPUs, %s; load average %s before, %s after\n", m.CPUs, m.CPUModel, m.LoadBefore, m.LoadAfter)
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
	b.WriteString("a shared, noisy machine; absolute numbers move with the load of other processes. The result\n")
	b.WriteString("compares the median with the target of shared/DESIGN.md.\n\n")

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
			amed := 0.0
			if s.anchor != "" && len(s.anchors) > 0 {
				amed, _, _ = stats(s.anchors)
				anchor = fmt.Sprintf("%s: %s %s", s.anchor, num(amed), s.unit)
				if amed != 0 {
					ratio = fmt.Sprintf("%.3g", med/amed)
				}
			}
			result := ""
			if s.target.Set() {
				r := 0.0
				if amed != 0 {
					r = med / amed
				}
				result = "fail"
				if s.target.Met(med, r) {
					result = "pass"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.name, kfn, anchor, ratio, s.target.Text, result)
		}
		b.WriteString("\n")
	}

	b.WriteString("## Runs\n\n| program | repetition | took | outcome |\n|---|---|---|---|\n")
	for _, r := range runs {
		outcome := fmt.Sprintf("%d figures", len(r.figures))
		if r.err != "" {
			outcome = "error: " + r.err
		}
		rep := "-"
		if r.rep > 0 {
			rep = fmt.Sprint(r.rep)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.program, rep, r.took.Round(time.Second), outcome)
	}
	b.WriteString("\n")
	return b.String()
}

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
