package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kfn-dev/kfn/bench/figures"
)

func TestStats(t *testing.T) {
	med, lo, hi := stats([]float64{3, 1, 2})
	assert.Equal(t, [3]float64{2, 1, 3}, [3]float64{med, lo, hi})
	med, _, _ = stats([]float64{4, 1, 2, 3})
	assert.Equal(t, 2.5, med, "even count: mean of the middle two")
	med, lo, hi = stats(nil)
	assert.Zero(t, med+lo+hi)
}

func TestRenderMediansRatiosAndVerdicts(t *testing.T) {
	fig := func(v, anchor float64) figures.Figure {
		return figures.Figure{Group: "event bridge", Name: "throughput", Unit: "events/s", Value: v, Anchor: "bare", AnchorValue: anchor,
			Target: figures.Target{Min: 10000, MinRatio: 0.6, Text: ">= 10,000 events/s and >= 60% of bare"}}
	}
	p99 := func(v float64) figures.Figure {
		return figures.Figure{Group: "event bridge", Name: "p99", Unit: "ms", Value: v, Target: figures.Target{Max: 5, Text: "< 5 ms"}}
	}
	runs := []repetition{
		{program: "eventbridge", rep: 1, took: time.Minute, figures: []figures.Figure{fig(9000, 12000), p99(3)}},
		{program: "eventbridge", rep: 2, took: time.Minute, figures: []figures.Figure{fig(11000, 14000), p99(4)}},
		{program: "eventbridge", rep: 3, took: time.Minute, figures: []figures.Figure{fig(10500, 13000), p99(9)}},
		{program: "scaler", err: "not available: bench/scaler does not exist in this checkout"},
	}
	runs[0].command, runs[0].stolen = "go run ./bench/eventbridge -rounds 2", "29%"
	doc := render(machine{CPUs: 2, CPUModel: "test CPU", Reps: 3, Versions: [][2]string{{"Go", "go1.26"}}, Stolen: "12%"}, runs)
	// Ratios are taken per repetition (0.75, 0.786, 0.808), then the median.
	assert.Contains(t, doc, "| throughput | 10500 events/s [9000–11000] | bare: 13000 events/s [12000–14000] | 0.786 [0.75–0.808] | >= 10,000 events/s and >= 60% of bare | pass |")
	assert.Contains(t, doc, "| p99 | 4 ms [3–9] |  |  | < 5 ms | pass |", "the median decides, the spread is shown")
	assert.Contains(t, doc, "| scaler | - | - | 0s | - | not available: bench/scaler does not exist in this checkout |  |")
	assert.Contains(t, doc, "| eventbridge | 1 | - | 1m0s | 29% | 2 figures | `go run ./bench/eventbridge -rounds 2` |", "the CPU the host took during the repetition")
	assert.Contains(t, doc, "| eventbridge | 2 | - | 1m0s | - | 2 figures |  |", "a run saved before the steal was kept")
	assert.Contains(t, doc, "CPU time taken by the host (steal) during the run: 12%")
	assert.Contains(t, doc, "Conditions: a machine of 2 cores shared")
	assert.Contains(t, doc, "2 CPUs, test CPU")

	runs[0].figures[1], runs[1].figures[1] = p99(6), p99(7)
	doc = render(machine{}, runs)
	assert.Contains(t, doc, "| p99 | 7 ms [6–9] |  |  | < 5 ms | fail |")

	// The ratio target is checked against the median of the per-repetition ratios.
	runs[0].figures[0], runs[1].figures[0], runs[2].figures[0] = fig(11000, 20000), fig(12000, 21000), fig(13000, 15000)
	doc = render(machine{}, runs)
	assert.Contains(t, doc, "| throughput | 12000 events/s [11000–13000] | bare: 20000 events/s [15000–21000] | 0.571 [0.55–0.867] | >= 10,000 events/s and >= 60% of bare | fail |")
}

func TestPeersSectionSurvives(t *testing.T) {
	assert.True(t, strings.HasPrefix(peers(""), peersHeading), "a fresh report gets the heading")
	old := "# kfn benchmarks\n\nold figures\n\n" + peersHeading + "\n\nKyma nodejs runtime: 9.9k req/s (2026-11-22, by hand)\n"
	assert.Equal(t, peersHeading+"\n\nKyma nodejs runtime: 9.9k req/s (2026-11-22, by hand)\n", peers(old))
}

func TestScalingCurves(t *testing.T) {
	point := func(x, v float64) figures.Figure {
		return figures.Figure{Group: "controller", Name: "n Functions", Unit: "s", Value: v,
			Series: "controller time to reconcile N Functions", X: x, XLabel: "Functions"}
	}
	runs := []repetition{
		{program: "controller-100", rep: 1, figures: []figures.Figure{point(100, 3)}},
		{program: "controller", rep: 1, figures: []figures.Figure{point(1000, 30)}},
		{program: "controller", rep: 2, figures: []figures.Figure{point(1000, 34)}},
		{program: "controller-5000", rep: 1, figures: []figures.Figure{point(5000, 160)}},
	}
	dir := t.TempDir()
	section, err := renderCurves(runs, dir)
	assert.NoError(t, err)
	assert.Contains(t, section, "### controller time to reconcile N Functions")
	assert.Contains(t, section, "| 1000 | 32.0 | 30.0–34.0 |")
	png := filepath.Join(dir, "controller-time-to-reconcile-n-functions.png")
	assert.Contains(t, section, "![controller time to reconcile N Functions]("+filepath.ToSlash(png)+")")
	b, err := os.ReadFile(png)
	assert.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "\x89PNG"), "a PNG is written")

	assert.Contains(t, section, "| 1000 | 32.0 | 30.0–34.0 | 2 |")

	// A curve whose figures have an anchor shows (and plots) it beside kfn.
	withAnchor := func(x, v, a float64) figures.Figure {
		return figures.Figure{Group: "event bridge", Name: "throughput", Unit: "events/s", Value: v, Anchor: "bare pipeline", AnchorValue: a,
			Series: "event bridge throughput by Subscriptions", X: x, XLabel: "Subscriptions"}
	}
	section, err = renderCurves([]repetition{{figures: []figures.Figure{withAnchor(1, 9000, 10000), withAnchor(10, 8000, 11000)}}}, dir)
	assert.NoError(t, err)
	assert.Contains(t, section, "| Subscriptions | kfn, events/s (median) | range | repetitions | bare pipeline, same run (median) |")
	assert.Contains(t, section, "| 10 | 8000 | 8000–8000 | 1 | 11000 |")

	none, err := renderCurves(runs[:0], dir)
	assert.NoError(t, err)
	assert.Empty(t, none)
}
