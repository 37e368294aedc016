package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// machine describes where and with what the run happened.
type machine struct {
	cpus                  int
	cpuModel              string
	goVersion, node       string
	python, natsServer    string
	loadBefore, loadAfter string
	started               time.Time
	elapsed               time.Duration
	reps                  int
	quick                 bool
}

// status is how one benchmark's runs went.
type status struct {
	b       benchmark
	runs    int
	failed  []string
	skipped string // why it did not run at all
	elapsed time.Duration
}

// plotFile is a rendered curve: its figure name and the PNG path relative
// to the report.
type plotFile struct {
	name, path string
}

// report is everything BENCHMARKS.md shows.
type report struct {
	machine  machine
	statuses []status
	figures  []*aggregate
	plots    []plotFile
	peers    string
}

// render writes the report as Markdown.
func render(w io.Writer, r report) error {
	var b strings.Builder
	m := r.machine
	mode := "full"
	if m.quick {
		mode = "quick (BENCH_QUICK=1: short measurements, for checking the harness; not figures to quote)"
	}
	fmt.Fprintf(&b, "# kfn benchmarks\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (`go run ./bench/report`); do not edit by hand except the hand-measured peers, which come from `bench/peers.md`.\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s (run took %s) |\n", m.started.UTC().Format("2006-01-02 15:04 MST"), m.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "| mode | %s, %d repetition(s) of the suite |\n", mode, m.reps)
	fmt.Fprintf(&b, "| CPUs | %d × %s |\n", m.cpus, m.cpuModel)
	fmt.Fprintf(&b, "| load average (1, 5, 15 min) | %s before, %s after |\n", m.loadBefore, m.loadAfter)
	fmt.Fprintf(&b, "| Go | %s |\n| Node.js | %s |\n| Python | %s |\n| nats-server | %s (embedded, Go module) |\n\n",
		m.goVersion, m.node, m.python, m.natsServer)
	b.WriteString(conditions)

	b.WriteString("\n## Figures\n\n")
	b.WriteString("Each cell is the median of the repetitions with the range (min–max) in brackets. The ratio is kfn over the anchor, computed per repetition (the anchor ran in the same process or script, minutes apart at most) and then summarised. \"met\"/\"MISSED\" compares the medians with the target from DESIGN.md.\n\n")
	b.WriteString("| figure | kfn | anchor, same run | ratio kfn/anchor | target | result |\n|---|---|---|---|---|---|\n")
	seen := map[string]bool{}
	byName := map[string]*aggregate{}
	for _, a := range r.figures {
		if !a.isCurve() {
			byName[a.name] = a
		}
	}
	for _, t := range targets {
		seen[t.name] = true
		a := byName[t.name]
		writeRow(&b, t.title, t, a, r.whyMissing(t))
	}
	for _, a := range r.figures {
		if a.isCurve() || seen[a.name] {
			continue
		}
		writeRow(&b, a.name, target{}, a, "")
	}

	b.WriteString("\n## Scaling curves\n\n")
	curves := map[string][]*aggregate{}
	var order []string
	for _, a := range r.figures {
		if !a.isCurve() {
			continue
		}
		if _, ok := curves[a.name]; !ok {
			order = append(order, a.name)
		}
		curves[a.name] = append(curves[a.name], a)
	}
	if len(order) == 0 {
		b.WriteString("No curve was measured in this run.\n")
	}
	for _, name := range order {
		pts := curves[name]
		fmt.Fprintf(&b, "### %s\n\n", name)
		for _, p := range r.plots {
			if p.name == name {
				fmt.Fprintf(&b, "![%s](%s)\n\n", name, p.path)
			}
		}
		fmt.Fprintf(&b, "| %s | %s (median, min–max) | repetitions |\n|---|---|---|\n", pts[0].xLabel, pts[0].unit)
		for _, p := range pts {
			fmt.Fprintf(&b, "| %s | %s | %d |\n", thousands(int64(math.Round(p.x))), cell(p.value, ""), p.value.n)
		}
		b.WriteString("\n")
	}

	b.WriteString("## Benchmarks run\n\n| benchmark | command | runs | status | time |\n|---|---|---|---|---|\n")
	for _, s := range r.statuses {
		st := "ok"
		switch {
		case s.skipped != "":
			st = s.skipped
		case len(s.failed) > 0:
			st = fmt.Sprintf("%d failed: %s", len(s.failed), oneLine(s.failed[0]))
		}
		cmdline := "`" + s.b.commandLine(m.quick) + "`"
		if s.skipped != "" && s.runs == 0 {
			cmdline = "`go run ./" + s.b.dir + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", s.b.name, cmdline, s.runs, st, s.elapsed.Round(time.Second))
	}

	b.WriteString("\n## Peers measured by hand\n\n")
	if strings.TrimSpace(r.peers) == "" {
		b.WriteString("None recorded (bench/peers.md is missing).\n")
	} else {
		b.WriteString(strings.TrimSpace(r.peers) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// conditions states how to read the figures.
const conditions = `Conditions: a shared machine with 2 cores, on which other developers run tests while this runs; the load generators run on the same cores as what they measure. Absolute figures are noisy and low; the ratios against anchors measured in the same run are the figures that count (DESIGN.md). JetStream uses file storage with its default sync (periodic, not per message).
`

// whyMissing says why a target's figure has no data in this run.
func (r report) whyMissing(t target) string {
	if t.missing != "" {
		return t.missing
	}
	prefix, _, _ := strings.Cut(t.name, "/")
	for _, s := range r.statuses {
		if s.b.name == prefix && s.skipped != "" {
			return s.skipped
		}
		if s.b.name == prefix && len(s.failed) > 0 && s.runs == len(s.failed) {
			return "benchmark failed"
		}
	}
	if r.machine.quick {
		return "not measured in a quick run"
	}
	return "not measured"
}

func writeRow(b *strings.Builder, title string, t target, a *aggregate, missing string) {
	text := t.text
	if text == "" {
		text = "—"
	}
	if a == nil || a.value.n == 0 {
		fmt.Fprintf(b, "| %s | %s | | | %s | |\n", title, missing, text)
		return
	}
	anchor, ratio := "—", "—"
	if a.anchor.n > 0 {
		anchor = a.anchorName + ": " + cell(a.anchor, a.unit)
	}
	if a.ratio.n > 0 {
		ratio = cell(a.ratio, "")
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", title, cell(a.value, a.unit), anchor, ratio, text, verdict(t, a))
}

// cell formats a spread: "12,345 events/s (11,002–13,400)".
func cell(s spread, unit string) string {
	if s.n == 0 {
		return "—"
	}
	v := num(s.median)
	if unit != "" {
		v += " " + unit
	}
	if s.n > 1 {
		v += " (" + num(s.min) + "–" + num(s.max) + ")"
	}
	return v
}

// num formats a number with three significant digits at most below 100
// and thousands separators above.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return thousands(int64(math.Round(v)))
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
