package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotCurves draws each scaling curve of figs (median with min–max error
// bars, logarithmic x) as a PNG in dir and returns the files, with paths
// relative to relTo (the report's directory).
func plotCurves(figs []*aggregate, dir, relTo string) ([]plotFile, error) {
	curves := map[string][]*aggregate{}
	var order []string
	for _, a := range figs {
		if !a.isCurve() {
			continue
		}
		if _, ok := curves[a.name]; !ok {
			order = append(order, a.name)
		}
		curves[a.name] = append(curves[a.name], a)
	}
	var out []plotFile
	for _, name := range order {
		path := filepath.Join(dir, strings.ReplaceAll(name, "/", "-")+".png")
		if err := plotCurve(name, curves[name], path); err != nil {
			return nil, fmt.Errorf("plot %s: %w", name, err)
		}
		rel, err := filepath.Rel(relTo, path)
		if err != nil {
			rel = path
		}
		out = append(out, plotFile{name: name, path: filepath.ToSlash(rel)})
	}
	return out, nil
}

// errPoints are a curve's medians with their min–max as y errors.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func plotCurve(name string, pts []*aggregate, path string) error {
	p := plot.New()
	p.Title.Text = name
	p.X.Label.Text = pts[0].xLabel
	p.Y.Label.Text = pts[0].unit
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	var e errPoints
	for _, a := range pts {
		if a.x <= 0 {
			continue // not drawable on a log axis
		}
		e.XYs = append(e.XYs, plotter.XY{X: a.x, Y: a.value.median})
		e.YErrors = append(e.YErrors, struct{ Low, High float64 }{a.value.median - a.value.min, a.value.max - a.value.median})
	}
	if len(e.XYs) == 0 {
		return fmt.Errorf("no point with x > 0")
	}
	line, points, err := plotter.NewLinePoints(e.XYs)
	if err != nil {
		return err
	}
	bars, err := plotter.NewYErrorBars(e)
	if err != nil {
		return err
	}
	p.Add(line, points, bars)
	p.Y.Min = 0
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}
