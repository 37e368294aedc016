package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// curve is a scaling curve: the median Value at each X of a Series, and
// the anchor's when its figures have one.
type curve struct {
	title, xLabel, unit, anchor string
	points                      map[float64][]float64 // X -> values of every repetition
	anchors                     map[float64][]float64 // X -> anchor values of every repetition
}

// curves gathers the figures that belong to a Series, in order of first
// appearance.
func curves(runs []repetition) []*curve {
	var out []*curve
	byTitle := map[string]*curve{}
	for _, r := range runs {
		for _, f := range r.figures {
			if f.Series == "" {
				continue
			}
			c, ok := byTitle[f.Series]
			if !ok {
				c = &curve{title: f.Series, xLabel: f.XLabel, unit: f.Unit, anchor: f.Anchor,
					points: map[float64][]float64{}, anchors: map[float64][]float64{}}
				byTitle[f.Series] = c
				out = append(out, c)
			}
			c.points[f.X] = append(c.points[f.X], f.Value)
			if f.Anchor != "" && f.Anchor == c.anchor {
				c.anchors[f.X] = append(c.anchors[f.X], f.AnchorValue)
			}
		}
	}
	return out
}

// xs returns the curve's X values in order.
func (c *curve) xs() []float64 {
	var xs []float64
	for x := range c.points {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	return xs
}

// slug is a file name for a title.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	return strings.Trim(b.String(), "-")
}

// plotCurve draws c's medians against a logarithmic X axis into dir as a
// PNG and returns its path.
func plotCurve(c *curve, dir string) (string, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = c.xLabel
	p.Y.Label.Text = c.unit
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	var pts, apts plotter.XYs
	for _, x := range c.xs() {
		med, _, _ := stats(c.points[x])
		pts = append(pts, plotter.XY{X: x, Y: med})
		if as := c.anchors[x]; len(as) > 0 {
			amed, _, _ := stats(as)
			apts = append(apts, plotter.XY{X: x, Y: amed})
		}
	}
	lines := []any{"kfn (median)", pts}
	if len(apts) > 1 {
		lines = append(lines, c.anchor+" (median, same run)", apts)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return "", fmt.Errorf("plot %s: %w", c.title, err)
	}
	// Room above the highest point for the legend.
	top := 0.0
	for _, xy := range append(pts, apts...) {
		top = max(top, xy.Y)
	}
	p.Y.Max = 1.3 * top
	p.Legend.Top = true
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, slug(c.title)+".png")
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return "", fmt.Errorf("save %s: %w", path, err)
	}
	return path, nil
}

// renderCurves plots every curve with at least two points into dir and
// returns the BENCHMARKS.md section that shows them (and their numbers).
func renderCurves(runs []repetition, dir string) (string, error) {
	cs := curves(runs)
	if len(cs) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("## Scaling curves\n\n")
	b.WriteString("Each point is the median of the repetitions that measured it (points that are not also a\n" +
		"headline figure run once in a full run). Latency is measured at a fixed rate: where the throughput\n" +
		"at a point is below that rate, events queue and its p99 is mostly time in the queue.\n\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "### %s\n\n", c.title)
		xs := c.xs()
		if len(xs) > 1 {
			path, err := plotCurve(c, dir)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "![%s](%s)\n\n", c.title, filepath.ToSlash(path))
		}
		if c.anchor != "" {
			fmt.Fprintf(&b, "| %s | kfn, %s (median) | range | repetitions | %s, same run (median) |\n|---|---|---|---|---|\n", c.xLabel, c.unit, c.anchor)
		} else {
			fmt.Fprintf(&b, "| %s | kfn, %s (median) | range | repetitions |\n|---|---|---|---|\n", c.xLabel, c.unit)
		}
		for _, x := range xs {
			med, lo, hi := stats(c.points[x])
			fmt.Fprintf(&b, "| %s | %s | %s–%s | %d |", strconv.FormatFloat(x, 'f', -1, 64), num(med), num(lo), num(hi), len(c.points[x]))
			if c.anchor != "" {
				a := ""
				if as := c.anchors[x]; len(as) > 0 {
					amed, _, _ := stats(as)
					a = num(amed)
				}
				fmt.Fprintf(&b, " %s |", a)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
