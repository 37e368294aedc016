package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// curve is a scaling curve: the median Value at each X of a Series.
type curve struct {
	title, xLabel, unit string
	points              map[float64][]float64 // X -> values of every repetition
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
				c = &curve{title: f.Series, xLabel: f.XLabel, unit: f.Unit, points: map[float64][]float64{}}
				byTitle[f.Series] = c
				out = append(out, c)
			}
			c.points[f.X] = append(c.points[f.X], f.Value)
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
	var pts plotter.XYs
	for _, x := range c.xs() {
		med, _, _ := stats(c.points[x])
		pts = append(pts, plotter.XY{X: x, Y: med})
	}
	if err := plotutil.AddLinePoints(p, "kfn (median)", pts); err != nil {
		return "", fmt.Errorf("plot %s: %w", c.title, err)
	}
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
		fmt.Fprintf(&b, "| %s | %s (median) | range |\n|---|---|---|\n", c.xLabel, c.unit)
		for _, x := range xs {
			med, lo, hi := stats(c.points[x])
			fmt.Fprintf(&b, "| %s | %s | %s–%s |\n", num(x), num(med), num(lo), num(hi))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
